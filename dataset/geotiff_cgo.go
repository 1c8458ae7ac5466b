//go:build cgo

package dataset

import (
	"pipe/dataset/geotiff"
	"pipe/spec"
)

var (
	_ Raster           = (*geotiff.Dataset)(nil)
	_ TargetNormalized = (*geotiff.Dataset)(nil)
	_ SuperResolution  = (*geotiff.Dataset)(nil)
	_ splitter         = (*geotiff.Dataset)(nil)
)

func openGeoTIFF(b *spec.Source, c *config) (Dataset, error) {
	d, err := geotiff.Open(b, c.geotiffOptions())
	if err != nil {
		return nil, err
	}
	return d, nil
}
