// Package dataset reads the sources a pipeline trains, evaluates and predicts
// on (IDX, CSV, folders of images, GeoTIFF rasters through GDAL, and
// synthetic data) and feeds them to the executor in batches through a
// prefetching loader that is deterministic under a seed. It reads the
// typed source specs of package spec (decoded once from the checked
// program by stdlib.DecodeSource), never the syntax tree; it knows
// nothing of models.
//
// # Opening
//
// Open takes a source spec and returns a Dataset of all its samples,
// dispatching on the spec's kind (idx.go, csv.go, images.go, synthetic.go,
// volume.go and the package geotiff each say what their kind reads and
// how). Paths are
// relative to WithBase (the .pipe file's folder; the working directory
// by default). OpenSplit also applies the source's split with
// SplitByFraction (a geotiff source splits its tiles itself, by tile or
// by blocks of pixels); statistics that normalise inputs are computed on
// the training part only, so validation scores are honest. Other knobs the
// source does not hold are Options: WithSeed (the file's seed), WithNorm
// (reuse the training source's normalisation for an evaluation source),
// WithChannels (1-channel images), WithWorkers, WithCacheBytes.
//
// Errors name the file as written in the block and, where it applies, the
// row and column (CSV), byte offset (IDX) or rows (rasters); they are
// *SourceError values carrying the range of the field concerned, for the
// executor to turn into diagnostics.
//
// Optional interfaces give what some kinds know beyond Dataset:
// Normalized (the normalisation applied), TargetNormalized (the
// regression targets' statistics over the training part, with which the
// executor standardises them), ClassNamer (class names),
// Tabular (the input columns after one-hot encoding), Skipper (images
// left out under strict false) and Raster (a geotiff's grid, tiles and
// windows, for predict). Subset (from SplitByFraction) wraps a parent;
// Root finds it.
//
// # Loading
//
// NewLoader(ds, opts).Epoch(e) yields batches (loader.go): shuffled by a
// permutation of (Seed, e), augmented per sample from (Seed, e, index)
// (augment.go), filled by Workers goroutines at most Workers × Prefetch
// batches ahead, with buffers recycled through Release. The same options
// give the same batches whatever the number of workers. All randomness
// comes from the SplitMix64 streams of rng.go, stable across Go releases.
//
// # Predicting on rasters
//
// Windows cuts a scene into overlapping tiles, WindowSet makes them a
// Dataset for the loader, a Blender accumulates the model's outputs with
// a cosine ramp so that overlaps leave no seams, and WritePrediction
// writes the result as a GeoTIFF on the source's grid (predict.go).
package dataset

import "context"

// Dataset is a random-access collection of samples. Shapes are per sample,
// without the batch dimension. Implementations must be safe for concurrent
// Read calls from several loader workers (a GeoTIFF dataset keeps one GDAL
// handle per worker).
type Dataset interface {
	// Len is the number of samples.
	Len() int
	// XShape is one input's shape: [C, H, W] for images and rasters, [F]
	// for tabular rows.
	XShape() []int64
	// YShape is one target's shape: [] for a class index, [K] for a
	// regression vector, [1, H, W] or [K, H, W] for per-pixel targets.
	// A dataset without targets (a geotiff source without target,
	// opened for predict) has a YShape whose product is 0, [0, H, W].
	YShape() []int64
	// Classes is the number of classes for class-index targets and 0
	// otherwise.
	Classes() int
	// HasMask says whether Read fills a validity mask (1 valid, 0 nodata)
	// shaped like y, to be left out of the loss.
	HasMask() bool
	// Read fills x (len = product of XShape), y (product of YShape, or 1
	// for a class index stored as a float) and, when HasMask, mask (same
	// length as y) for sample i.
	Read(i int, x, y, mask []float32) error
	// Close releases files and handles.
	Close() error
}

// Batch is a group of samples laid out contiguously: X holds N inputs
// one after another (NCHW), Y and Mask N targets.
type Batch struct {
	N       int
	X, Y    []float32
	Mask    []float32
	Indices []int
}

// Iterator yields the batches of one epoch in order.
type Iterator interface {
	// Next returns the next batch, or nil and io.EOF at the end of the
	// epoch. It returns ctx.Err() when ctx is cancelled.
	Next(ctx context.Context) (*Batch, error)
	// Release hands a batch's buffers back for reuse.
	Release(*Batch)
	// Close stops the workers.
	Close() error
}
