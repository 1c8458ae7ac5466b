//go:build !cgo

package dataset

import (
	"pipe/dataset/geotiff"
	"pipe/spec"
)

// openGeoTIFF refuses with geotiff's message: reading a GeoTIFF needs GDAL.
func openGeoTIFF(b *spec.Source, c *config) (Dataset, error) {
	_, err := geotiff.Open(b, c.geotiffOptions())
	return nil, err
}
