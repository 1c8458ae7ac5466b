//go:build !cgo

package geotiff

import (
	"errors"

	"pipe/spec"
)

// errNoGDAL is the error of a geotiff source in a pipe built without cgo,
// which leaves GDAL out (a binary for a machine without the libraries,
// such as a GPU node, built with CGO_ENABLED=0).
var errNoGDAL = errors.New("this pipe was built without GDAL (CGO_ENABLED=0), so it cannot read GeoTIFF rasters; use a pipe built with cgo and GDAL (make build)")

// Dataset is a geotiff source's tiles; without cgo none can be opened.
type Dataset struct{}

// Open refuses: reading a GeoTIFF needs GDAL.
func Open(b *spec.Source, c *Options) (*Dataset, error) { return nil, errNoGDAL }

// Tiles refuses: reading a GeoTIFF needs GDAL.
func Tiles(b *spec.Source, c *Options) (int, error) { return 0, errNoGDAL }

// Resident refuses: reading a GeoTIFF needs GDAL.
func Resident(b *spec.Source, c *Options) (int64, string, error) { return 0, "", errNoGDAL }

// SampleShape refuses: reading a GeoTIFF needs GDAL.
func SampleShape(b *spec.Source, c *Options) ([]int64, error) { return nil, errNoGDAL }

// Size refuses: reading a GeoTIFF needs GDAL.
func Size(b *spec.Source, c *Options) (w, h int64, err error) { return 0, 0, errNoGDAL }

// InitGDAL does nothing: there is no GDAL.
func InitGDAL() {}

// WritePrediction refuses: writing a GeoTIFF needs GDAL.
func WritePrediction(path string, grid GeoGrid, bands int, data []float32) error { return errNoGDAL }
