//go:build !cgo

package dataset

import (
	"fmt"

	"pipe/spec"
)

func openVolumeSource(b *spec.Source, c *config) (Dataset, error) {
	return nil, blockErr(b, "path", fmt.Errorf("volume source %s: reading TIFF stacks needs GDAL, and this pipe was built without cgo", b.Name))
}

func readStack(path string) ([]float32, []int, error) {
	return nil, nil, fmt.Errorf("%s: reading TIFF stacks needs GDAL, and this pipe was built without cgo", path)
}
