package dataset

import (
	"errors"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	// Decoders: image.Decode picks by content. The standard library reads
	// PNG, JPEG and GIF; x/image adds BMP, TIFF and WebP.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/bmp"
	"golang.org/x/image/draw"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"

	"pipe/spec"
)

// An images source is a folder: one sub-folder per class
// (classification), or images with a masks folder beside them
// (segmentation, a [1, H, W] target in {0, 1}). Every image is decoded and
// resized once at Open, so undecodable ones are found before training
// (strict true stops there; strict false skips and counts them); the
// decoded bytes are cached up to WithCacheBytes. Images resize bilinearly,
// masks by nearest neighbour. Details: docs/design/dataset-sources.md.

// Skipper is implemented by datasets that leave out samples that cannot
// be read (an images source with strict false).
type Skipper interface {
	// Skipped is the number of files left out.
	Skipped() int
	// SkippedFiles lists them with the reason, as "path: reason".
	SkippedFiles() []string
}

var imageExts = map[string]bool{
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true,
	".bmp": true, ".tif": true, ".tiff": true, ".webp": true,
}

func isImage(name string) bool {
	return !strings.HasPrefix(name, ".") && imageExts[strings.ToLower(filepath.Ext(name))]
}

type imageItem struct {
	path, mask string // as written: the block's folder joined with the name
	class      int
}

type imagesDataset struct {
	c          *config
	items      []imageItem
	h, w, ch   int
	seg        bool
	fixed      bool // resize given: any input size is scaled to h×w
	classNames []string
	skipped    []string
	norm       Norm
	lut        [][256]float32 // per channel
	cache      [][]byte       // per item: ch·h·w pixels then h·w mask; nil past the budget
}

func openImages(b *spec.Source, c *config) (Dataset, error) {
	d := &imagesDataset{c: c, ch: c.channels}
	if b.Images.Channels != nil && !c.channelsSet {
		d.ch = int(*b.Images.Channels)
	}
	if d.ch != 1 && d.ch != 3 {
		return nil, blockErr(b, "channels", fmt.Errorf("images source %s: %d channels: images are read with 1 or 3", b.Name, d.ch))
	}
	root := b.Images.Path
	masks := b.Images.Masks
	d.seg = masks != ""
	var err error
	if d.seg {
		d.items, d.skipped, err = listSegmentation(c, root, masks)
	} else {
		d.items, d.classNames, err = listClasses(c, root)
	}
	if err != nil {
		return nil, blockErr(b, "path", err)
	}
	strict := b.Images.Strict
	if strict && len(d.skipped) > 0 {
		return nil, blockErr(b, "masks", errors.New(d.skipped[0]))
	}
	if v := b.Images.Resize; v != nil {
		d.h, d.w, d.fixed = int(v[0]), int(v[1]), true
	}

	// Decode everything once, in parallel.
	type result struct {
		pix  []byte
		sums [3][2]float64 // per channel: sum, sum of squares
		err  error
	}
	res := make([]result, len(d.items))
	if d.h == 0 {
		// No resize: the first image that decodes fixes the size.
		for i, it := range d.items {
			cfg, err := decodeConfig(c, it.path)
			if err == nil {
				d.h, d.w = cfg.Height, cfg.Width
				break
			}
			res[i].err = err
			if strict {
				return nil, blockErr(b, "path", err)
			}
		}
	}
	per := d.ch * d.h * d.w
	if d.seg {
		per += d.h * d.w
	}
	budget := int(min(c.cacheBytes/int64(max(per, 1)), int64(len(d.items))))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(c.workers, max(len(d.items), 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(d.items) {
					return
				}
				if res[i].err != nil {
					continue
				}
				pix, err := d.decode(d.items[i])
				if err != nil {
					res[i].err = err
					continue
				}
				for ch := 0; ch < d.ch; ch++ {
					for _, v := range pix[ch*d.h*d.w : (ch+1)*d.h*d.w] {
						f := float64(v)
						res[i].sums[ch][0] += f
						res[i].sums[ch][1] += f * f
					}
				}
				if i < budget {
					res[i].pix = pix
				}
			}
		})
	}
	wg.Wait()

	var kept []imageItem
	var sums [][3][2]float64
	for i, r := range res {
		if r.err != nil {
			var se *sizeError
			if errors.As(r.err, &se) {
				return nil, blockErr(b, "path", r.err)
			}
			if strict {
				return nil, blockErr(b, "path", fmt.Errorf("%w (strict false skips and counts such images)", r.err))
			}
			d.skipped = append(d.skipped, r.err.Error())
			continue
		}
		kept = append(kept, d.items[i])
		d.cache = append(d.cache, r.pix)
		sums = append(sums, r.sums)
	}
	d.items = kept
	if len(d.items) == 0 {
		return nil, blockErr(b, "path", fmt.Errorf("%s: no images could be read (%d skipped)", root, len(d.skipped)))
	}

	mode := b.Images.Normalize
	if mode == "" {
		mode = "scale"
	}
	switch mode {
	case "none":
	case "scale":
		d.norm = Norm{Mean: make([]float64, d.ch), Std: slices.Repeat([]float64{255}, d.ch)}
	case "standard":
		if c.norm != nil && len(c.norm.Mean) == d.ch {
			d.norm = *c.norm
			break
		}
		train := trainIndices(b, c, len(d.items))
		if train == nil {
			train = make([]int, len(d.items))
			for i := range train {
				train[i] = i
			}
		}
		d.norm = Norm{Mean: make([]float64, d.ch), Std: make([]float64, d.ch)}
		n := float64(len(train) * d.h * d.w)
		for ch := range d.ch {
			var s, ss float64
			for _, i := range train {
				s += sums[i][ch][0]
				ss += sums[i][ch][1]
			}
			mean := s / n
			d.norm.Mean[ch] = mean
			d.norm.Std[ch] = math.Sqrt(max(ss/n-mean*mean, 0))
			if d.norm.Std[ch] == 0 {
				d.norm.Std[ch] = 1
			}
		}
	default:
		return nil, blockErr(b, "normalize", fmt.Errorf("images source %s: normalize %s is not supported", b.Name, mode))
	}
	d.lut = make([][256]float32, d.ch)
	for ch := range d.ch {
		for v := range 256 {
			d.lut[ch][v] = float32(v)
			if d.norm.Mean != nil {
				d.lut[ch][v] = float32((float64(v) - d.norm.Mean[ch]) / d.norm.Std[ch])
			}
		}
	}
	return d, nil
}

// listClasses lists the images of each class folder under root.
func listClasses(c *config, root string) ([]imageItem, []string, error) {
	dir, err := c.localFolder(root)
	if err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fileErr(c, root, err)
	}
	var items []imageItem
	var classes []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", under(root, e.Name()), err)
		}
		k := len(classes)
		classes = append(classes, e.Name())
		for _, f := range files {
			if !f.IsDir() && isImage(f.Name()) {
				items = append(items, imageItem{path: under(root, e.Name(), f.Name()), class: k})
			}
		}
	}
	if len(classes) == 0 {
		return nil, nil, fmt.Errorf("%s: no class folders (a classification source is a folder with one sub-folder of images per class; give masks for segmentation)", root)
	}
	if len(items) == 0 {
		return nil, nil, fmt.Errorf("%s: the class folders hold no images (%s)", root, extList())
	}
	return items, classes, nil
}

// listSegmentation pairs each image of root with the mask of the same
// base name in masks. Images without a mask are returned in missing.
func listSegmentation(c *config, root, masks string) (items []imageItem, missing []string, err error) {
	dir, err := c.localFolder(root)
	if err != nil {
		return nil, nil, err
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fileErr(c, root, err)
	}
	mdir, err := c.localFolder(masks)
	if err != nil {
		return nil, nil, err
	}
	mfiles, err := os.ReadDir(mdir)
	if err != nil {
		return nil, nil, fileErr(c, masks, err)
	}
	byBase := map[string]string{}
	for _, f := range mfiles {
		if !f.IsDir() && isImage(f.Name()) {
			base := strings.TrimSuffix(f.Name(), filepath.Ext(f.Name()))
			if _, dup := byBase[base]; !dup {
				byBase[base] = f.Name()
			}
		}
	}
	for _, f := range files {
		if f.IsDir() || !isImage(f.Name()) {
			continue
		}
		base := strings.TrimSuffix(f.Name(), filepath.Ext(f.Name()))
		p := under(root, f.Name())
		m, ok := byBase[base]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s: no mask named %s.* in %s", p, base, masks))
			continue
		}
		items = append(items, imageItem{path: p, mask: under(masks, m)})
	}
	if len(items) == 0 && len(missing) == 0 {
		return nil, nil, fmt.Errorf("%s: no images (%s)", root, extList())
	}
	return items, missing, nil
}

func extList() string {
	exts := make([]string, 0, len(imageExts))
	for e := range imageExts {
		exts = append(exts, e)
	}
	slices.Sort(exts)
	return "looked for " + strings.Join(exts, " ")
}

// sizeError is an image whose size differs from the others' when there
// is no resize: the source is misconfigured, so strict false does not
// skip it.
type sizeError struct{ error }

func (e *sizeError) Unwrap() error { return e.error }

func decodeConfig(c *config, p string) (image.Config, error) {
	f, err := openFile(c, p)
	if err != nil {
		return image.Config{}, err
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return cfg, fmt.Errorf("%s: cannot decode: %v", p, err)
	}
	return cfg, nil
}

func decodeImage(c *config, p string) (image.Image, error) {
	f, err := openFile(c, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot decode: %v", p, err)
	}
	return img, nil
}

// decode reads an item: ch planes of h×w bytes, then the binary mask.
func (d *imagesDataset) decode(it imageItem) ([]byte, error) {
	img, err := decodeImage(d.c, it.path)
	if err != nil {
		return nil, err
	}
	sb := img.Bounds()
	if !d.fixed && (sb.Dx() != d.w || sb.Dy() != d.h) {
		return nil, &sizeError{fmt.Errorf("%s: the image is %dx%d but the first one is %dx%d; add resize HxW to the source", it.path, sb.Dy(), sb.Dx(), d.h, d.w)}
	}
	plane := d.h * d.w
	out := ImageBytes(img, d.ch, d.h, d.w)
	if d.seg {
		out = append(out, make([]byte, plane)...)
		m, err := decodeImage(d.c, it.mask)
		if err != nil {
			return nil, err
		}
		gray := image.NewGray(image.Rect(0, 0, d.w, d.h))
		draw.NearestNeighbor.Scale(gray, gray.Bounds(), m, m.Bounds(), draw.Src, nil)
		binary := true
		for _, v := range gray.Pix {
			if v > 1 {
				binary = false
				break
			}
		}
		dst := out[d.ch*plane:]
		for p, v := range gray.Pix {
			if (binary && v == 1) || v >= 128 {
				dst[p] = 1
			}
		}
	}
	return out, nil
}

func (d *imagesDataset) Len() int { return len(d.items) }
func (d *imagesDataset) XShape() []int64 {
	return []int64{int64(d.ch), int64(d.h), int64(d.w)}
}
func (d *imagesDataset) YShape() []int64 {
	if d.seg {
		return []int64{1, int64(d.h), int64(d.w)}
	}
	return []int64{}
}
func (d *imagesDataset) Classes() int {
	if d.seg {
		return 0
	}
	return len(d.classNames)
}
func (d *imagesDataset) HasMask() bool          { return false }
func (d *imagesDataset) Norm() Norm             { return d.norm }
func (d *imagesDataset) ClassNames() []string   { return slices.Clone(d.classNames) }
func (d *imagesDataset) Skipped() int           { return len(d.skipped) }
func (d *imagesDataset) SkippedFiles() []string { return slices.Clone(d.skipped) }
func (d *imagesDataset) Close() error           { return nil }

// SampleName implements SampleNamer.
func (d *imagesDataset) SampleName(i int) string {
	if i < 0 || i >= len(d.items) {
		return ""
	}
	return d.items[i].path
}

func (d *imagesDataset) Read(i int, x, y, _ []float32) error {
	if i < 0 || i >= len(d.items) {
		return fmt.Errorf("images: sample %d out of range [0, %d)", i, len(d.items))
	}
	pix := d.cache[i]
	if pix == nil {
		var err error
		if pix, err = d.decode(d.items[i]); err != nil {
			return err
		}
	}
	plane := d.h * d.w
	for ch := range d.ch {
		lut := &d.lut[ch]
		xs := x[ch*plane : (ch+1)*plane]
		for p, v := range pix[ch*plane : (ch+1)*plane] {
			xs[p] = lut[v]
		}
	}
	if d.seg {
		for p, v := range pix[d.ch*plane:] {
			y[p] = float32(v)
		}
	} else {
		y[0] = float32(d.items[i].class)
	}
	return nil
}
