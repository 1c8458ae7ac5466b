//go:build !cgo

package data

import (
	"errors"

	"pipe/spec"
)

// errNoGDAL is the error of a geotiff source in a pipe built without cgo,
// which leaves GDAL out (a binary for a machine without the libraries,
// such as a GPU node, built with CGO_ENABLED=0).
var errNoGDAL = errors.New("this pipe was built without GDAL (CGO_ENABLED=0), so it cannot read GeoTIFF rasters; use a pipe built with cgo and GDAL (make build)")

func openGeoTIFF(b *spec.Source, c *config) (Dataset, error) { return nil, errNoGDAL }

// WritePrediction refuses: writing a GeoTIFF needs GDAL.
func WritePrediction(path string, grid GeoGrid, bands int, data []float32) error { return errNoGDAL }
