//go:build !cgo

package data

import "pipe/spec"

func countTiles(b *spec.Source, c *config) (int, error) { return 0, errNoGDAL }

func rasterResident(b *spec.Source, c *config) (Resident, error) { return Resident{}, errNoGDAL }

// RasterSize is the width and height in pixels of a geotiff source's
// scene; without GDAL it is an error.
func RasterSize(b *spec.Source, opts ...Option) (w, h int64, err error) { return 0, 0, errNoGDAL }
