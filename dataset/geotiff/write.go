//go:build cgo

package geotiff

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/airbusgeo/godal"
)

// WritePrediction writes data (bands × grid.Height × grid.Width,
// band-sequential) as a float32 GeoTIFF on grid: the source's CRS and
// geotransform, 256×256 tiles, DEFLATE with the floating-point predictor,
// NaN as no-data. It writes a temporary file in the destination's folder
// (created if missing) and renames it over path, so a reader never sees a
// half-written file and a failed write leaves any previous file intact.
func WritePrediction(path string, grid GeoGrid, bands int, data []float32) (err error) {
	gdalInit()
	if bands < 1 || grid.Width < 1 || grid.Height < 1 {
		return fmt.Errorf("%s: nothing to write (%d bands of %dx%d)", path, bands, grid.Height, grid.Width)
	}
	if len(data) != bands*grid.Width*grid.Height {
		return fmt.Errorf("%s: %d values for %d bands of %dx%d (want %d)", path, len(data), bands, grid.Height, grid.Width, bands*grid.Width*grid.Height)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp.tif")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// GDAL creates the file itself (with the usual permissions); the
	// placeholder only reserved a unique name.
	tmp := f.Name()
	f.Close()
	os.Remove(tmp)
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	ds, err := godal.Create(godal.GTiff, tmp, bands, godal.Float32, grid.Width, grid.Height,
		godal.CreationOption("TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "COMPRESS=DEFLATE", "PREDICTOR=3", "BIGTIFF=IF_SAFER"),
		godal.SkipWarnings)
	if err != nil {
		return fmt.Errorf("%s: creating the GeoTIFF: %v", path, err)
	}
	werr := []error{ds.SetGeoTransform(grid.GeoTransform)}
	if grid.Projection != "" {
		werr = append(werr, ds.SetProjection(grid.Projection))
	}
	for _, bd := range ds.Bands() {
		werr = append(werr, bd.SetNoData(math.NaN()))
	}
	werr = append(werr, ds.Write(0, 0, data, grid.Width, grid.Height, godal.BandInterleaved()))
	werr = append(werr, ds.Close())
	if err := errors.Join(werr...); err != nil {
		return fmt.Errorf("%s: writing the GeoTIFF: %v", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
