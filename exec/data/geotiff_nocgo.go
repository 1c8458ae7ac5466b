//go:build !cgo

package data

import (
	"pipe/exec/data/geotiff"
	"pipe/spec"
)

// openGeoTIFF refuses with geotiff's message: reading a GeoTIFF needs GDAL.
func openGeoTIFF(b *spec.Source, c *config) (Dataset, error) {
	_, err := geotiff.Open(b, c.geotiffOptions())
	return nil, err
}
