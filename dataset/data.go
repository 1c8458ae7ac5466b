// Package dataset reads the sources a pipeline trains, evaluates and
// predicts on (IDX, CSV, folders of images, GeoTIFF rasters through GDAL,
// volumes and Zarr arrays, and synthetic data; local files, or object-store
// URLs through dataset/remote) and feeds them to the run loop in batches
// (dataset/samples) through a prefetching loader that is deterministic
// under a seed. It reads the typed source specs of package spec (decoded
// once from the checked program by stdlib.DecodeSource), never the syntax
// tree; it knows nothing of models.
//
// Open returns a Dataset of a source's samples, dispatching on its kind;
// OpenSplit also splits it, with normalising statistics from the training
// part only. Errors are *SourceError values with the field's range.
// NewLoader(ds, opts).Epoch(e) yields batches (loader.go), the same
// whatever the number of workers. Windows, WindowSet, Blender and
// WritePrediction predict on rasters (predict.go), Windows3 and Blender3
// on volumes (predict3d.go).
// The long form: docs/design/dataset-sources.md.
package dataset

import (
	"context"

	"pipe/dataset/samples"
)

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

// Batch is a group of samples laid out contiguously (samples.Batch, in a
// package of its own so that the engines need not link the readers).
type Batch = samples.Batch

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
