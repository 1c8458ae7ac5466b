package dataset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"pipe/dataset/remote"
	"pipe/dataset/source"
	"pipe/spec"
)

// Option is a knob of Open that the source spec does not hold.
type Option func(*config)

type config struct {
	base     string
	seed     int64
	seedSet  bool
	norm     *Norm
	channels int
	// channelsSet: WithChannels was given and wins over the block's field.
	channelsSet bool
	workers     int
	cacheBytes  int64

	mu     sync.Mutex
	copies map[string]string // a folder's URL → its local copy (localFolder)
}

// WithBase resolves the block's relative paths against dir: the folder of
// the .pipe file, or the working directory (the default, dir "").
func WithBase(dir string) Option { return func(c *config) { c.base = dir } }

// WithSeed is the seed used where the block gives none: a split without
// "seed", a synthetic source without "seed". Pass the file's seed; it is 0
// otherwise.
func WithSeed(seed int64) Option { return func(c *config) { c.seed, c.seedSet = seed, true } }

// WithNorm makes the source use n instead of statistics of its own, so
// that an evaluation source is scaled exactly as the training source was
// (take n from the training dataset's Norm method). It is ignored when its
// length does not match the source's channels or features, and when the
// block asks for normalize none.
func WithNorm(n Norm) Option { return func(c *config) { c.norm = &n } }

// WithChannels sets how many channels an images source yields: 3 (RGB,
// the default; grayscale images are repeated over the three) or 1
// (luminance; colour images are converted). Use it when the model's input
// says [1, H, W].
func WithChannels(n int) Option { return func(c *config) { c.channels, c.channelsSet = n, true } }

// WithWorkers bounds the goroutines Open uses to decode and check every
// image of an images source. The default is GOMAXPROCS.
func WithWorkers(n int) Option { return func(c *config) { c.workers = n } }

// WithCacheBytes is how much memory an images source may use to keep
// decoded, resized images (as bytes) so that epochs do not decode them
// again. The default is 512 MiB; 0 turns caching off.
func WithCacheBytes(n int64) Option { return func(c *config) { c.cacheBytes = n } }

func newConfig(opts []Option) *config {
	c := &config{channels: 3, workers: runtime.GOMAXPROCS(0), cacheBytes: 512 << 20}
	for _, o := range opts {
		o(c)
	}
	if c.workers < 1 {
		c.workers = 1
	}
	return c
}

// path resolves a path written in the source.
func (c *config) path(p string) string { return source.Resolve(c.base, p) }

// Norm is an affine input normalisation, x' = (x − Mean[c]) / Std[c], per
// channel (images, rasters) or per input column (tables); source.Norm
// says more. A dataset that normalises implements Normalized.
type Norm = source.Norm

// Normalized is implemented by datasets that normalise their inputs.
type Normalized interface {
	// Norm returns the normalisation applied to x; empty for none.
	Norm() Norm
}

// TargetNormalized is implemented by datasets that know the statistics of
// their regression targets over the training part (a geotiff source with
// a target). The dataset does not scale y itself: the executor
// standardises targets for training, y' = (y − Mean[k]) / Std[k] for
// target channel k, and maps the model's outputs back with the same
// numbers, those a checkpoint keeps.
type TargetNormalized interface {
	// TargetNorm returns the targets' mean and standard deviation per
	// channel over the valid positions of the training part (empty when
	// there are none), and whether the block asks for the targets to be
	// standardised (target_normalize standard, the default).
	TargetNorm() (n Norm, standardise bool)
}

// splitter is implemented by datasets that split themselves when they
// open (a geotiff source, whose split may go by blocks of pixels and whose
// target statistics need the training part).
type splitter interface {
	// Parts returns the training and validation samples, and false when
	// the source has no split.
	Parts() (train, val []int, ok bool)
}

// SourceError is an error about a source: Subject is the range of the
// field it concerns (the path of a missing file, the tile that does not
// fit), or the block when no field does. The executor turns it into a
// diagnostic.
type SourceError = source.Error

// blockErr wraps err with the range of the named field of s, or of its
// block.
func blockErr(s *spec.Source, field string, err error) error {
	return source.FieldErr(s, field, err)
}

// Open opens the data a source spec describes and returns all its
// samples. When the source has a split, the normalisation statistics are
// computed over the training part only (the same shuffle as OpenSplit),
// so that validation numbers are honest; use OpenSplit to get the parts.
func Open(b *spec.Source, opts ...Option) (Dataset, error) {
	if b == nil {
		return nil, errors.New("data: Open needs a source spec")
	}
	c := newConfig(opts)
	kind := b.Kind
	var (
		ds  Dataset
		err error
	)
	switch kind {
	case "idx":
		ds, err = openIDX(b, c)
	case "csv":
		ds, err = openCSV(b, c)
	case "images":
		ds, err = openImages(b, c)
	case "geotiff":
		ds, err = openGeoTIFF(b, c)
	case "synthetic":
		ds, err = openSynthetic(b, c)
	case "volume":
		ds, err = openVolumeSource(b, c)
	case "zarr":
		ds, err = openZarrSource(b, c)
	default:
		return nil, blockErr(b, "", fmt.Errorf("source %s: unknown kind %q", b.Name, kind))
	}
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// Split is an opened source and its parts.
type Split struct {
	// All holds every sample.
	All Dataset
	// Train is the training part: All when the block has no split.
	Train Dataset
	// Val is the validation part, or nil when the block has no split.
	Val Dataset
}

// Close closes All (the parts share its files).
func (s *Split) Close() error { return s.All.Close() }

// OpenSplit opens a source and, when its block has a split field, splits
// it with SplitByFraction using the split's seed (WithSeed's, or 0, when
// the split has none). A geotiff source splits its tiles itself, the same
// way, or by blocks of pixels when its split says blocks.
func OpenSplit(b *spec.Source, opts ...Option) (*Split, error) {
	ds, err := Open(b, opts...)
	if err != nil {
		return nil, err
	}
	s := &Split{All: ds, Train: ds}
	if sp, ok := ds.(splitter); ok {
		if tr, va, ok := sp.Parts(); ok {
			s.Train, s.Val = NewSubset(ds, tr), NewSubset(ds, va)
		}
		return s, nil
	}
	if frac, seed, ok := splitOf(b, newConfig(opts)); ok {
		s.Train, s.Val = SplitByFraction(ds, frac, seed)
	}
	return s, nil
}

// splitOf reads the source's split.
func splitOf(b *spec.Source, c *config) (frac float64, seed int64, ok bool) {
	if b.Split == nil {
		return 0, 0, false
	}
	seed = c.seed
	if b.Split.Seed != nil {
		seed = *b.Split.Seed
	}
	return b.Split.Fraction, seed, true
}

// trainIndices returns the indices of the training part of n samples, or
// nil (all) when the block has no split.
func trainIndices(b *spec.Source, c *config, n int) []int {
	frac, seed, ok := splitOf(b, c)
	if !ok {
		return nil
	}
	tr, _ := source.SplitIndices(n, frac, seed)
	return tr
}

// Augmentations returns the augment list of a source (empty when it has
// none), for LoaderOptions.Augment on the training loader.
func Augmentations(b *spec.Source) []string {
	return b.Augment
}

// openFile opens a file named in the block, with an error that names the
// path as written and where it was looked for.
func openFile(c *config, p string) (*os.File, error) {
	local, err := c.local(p)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(local)
	if err != nil {
		return nil, fileErr(c, p, err)
	}
	return f, nil
}

// local is the local file that p names: p resolved against the base, or
// for a URL the copy remote.Fetch keeps (one HEAD to check it), or the
// file's place in a folder copied before (localFolder).
func (c *config) local(p string) (string, error) {
	if !remote.IsURL(p) {
		return c.path(p), nil
	}
	c.mu.Lock()
	for root, dir := range c.copies {
		if rel, ok := strings.CutPrefix(p, root+"/"); ok {
			c.mu.Unlock()
			return filepath.Join(dir, filepath.FromSlash(rel)), nil
		}
	}
	c.mu.Unlock()
	return remote.Fetch(context.Background(), p)
}

// localFolder is the local folder that p names: p resolved against the
// base, or for a URL (an s3:// or gs:// prefix) the copy
// remote.FetchFolder keeps: every object under it, fetched in parallel
// the first time and checked against one listing after.
func (c *config) localFolder(p string) (string, error) {
	if !remote.IsURL(p) {
		return c.path(p), nil
	}
	root := strings.TrimSuffix(p, "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.copies[root]; ok {
		return d, nil
	}
	d, _, _, err := remote.FetchFolder(context.Background(), root)
	if err != nil {
		return "", err
	}
	if c.copies == nil {
		c.copies = map[string]string{}
	}
	c.copies[root] = d
	return d, nil
}

// under is the path of elem under the folder root, as the source writes
// it: joined with '/' for a URL, as the file system joins otherwise.
func under(root string, elem ...string) string {
	if remote.IsURL(root) {
		return strings.TrimSuffix(root, "/") + "/" + strings.Join(elem, "/")
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

func fileErr(c *config, p string, err error) error { return source.FileErr(c.base, p, err) }

func prod(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}
