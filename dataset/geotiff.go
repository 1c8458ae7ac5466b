package dataset

import (
	"pipe/dataset/geotiff"
	"pipe/spec"
)

// A geotiff source is read by package geotiff; these hand it data's
// options and give its figures data's shapes.

// geotiffOptions are c as package geotiff takes them.
func (c *config) geotiffOptions() *geotiff.Options {
	return &geotiff.Options{Base: c.base, Seed: c.seed, Norm: c.norm}
}

func countTiles(b *spec.Source, c *config) (int, error) {
	return geotiff.Tiles(b, c.geotiffOptions())
}

func rasterResident(b *spec.Source, c *config) (Resident, error) {
	n, what, err := geotiff.Resident(b, c.geotiffOptions())
	return Resident{Bytes: n, What: what}, err
}

// RasterSize is the width and height in pixels of a geotiff source's
// scene, read from its header.
func RasterSize(b *spec.Source, opts ...Option) (w, h int64, err error) {
	return geotiff.Size(b, newConfig(opts).geotiffOptions())
}

// WritePrediction writes bands × grid.Height × grid.Width values,
// band-sequential, as a float32 GeoTIFF on grid (geotiff.WritePrediction
// says how), replacing path atomically.
func WritePrediction(path string, grid GeoGrid, bands int, data []float32) error {
	return geotiff.WritePrediction(path, grid, bands, data)
}
