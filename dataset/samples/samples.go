// Package samples holds Batch, the samples the engines train and predict
// on, apart from the data readers: the engine contract and the engines
// import it alone, so that they build and link without GDAL, the object
// store's client or the image codecs (package dataset, which fills
// batches, calls it dataset.Batch).
package samples

// Batch is a group of samples laid out contiguously: X holds N inputs
// one after another (NCHW), Y and Mask N targets. A loader given
// dataset.LoaderOptions.Rows reads part of each batch: the N rows from
// Offset of a batch of Global samples.
type Batch struct {
	N       int
	X, Y    []float32
	Mask    []float32
	Indices []int

	Offset, Global int
}

// Whole is the size of the batch this one is part of: Global when set,
// else N.
func (b *Batch) Whole() int {
	if b.Global > 0 {
		return b.Global
	}
	return b.N
}
