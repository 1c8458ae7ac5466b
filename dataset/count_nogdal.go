//go:build !cgo

package dataset

import "pipe/lang"

func countTiles(b *lang.Block, c *config) (int, error) { return 0, errNoGDAL }

func rasterResident(b *lang.Block, c *config) (Resident, error) { return Resident{}, errNoGDAL }

// RasterSize is the width and height in pixels of a geotiff source's
// scene; without GDAL it is an error.
func RasterSize(b *lang.Block, opts ...Option) (w, h int64, err error) { return 0, 0, errNoGDAL }
