// Package tileread holds what the GeoTIFF benchmarks (bench/cmd/tiles,
// bench/cmd/s3tiles) share: the source opened as a pipeline's, a pass of
// the loader over every tile, and a rate by the clock.
package tileread

import (
	"context"
	"io"
	"time"

	"pipe/dataset"
	"pipe/spec"
)

// Open opens the GeoTIFF at path as a pipeline's geotiff source with
// tiles of tile × tile and per-band normalisation.
func Open(path string, tile int64) (dataset.Dataset, error) {
	s := spec.NewSource("s", spec.KindGeoTIFF)
	s.GeoTIFF.Path, s.GeoTIFF.Tile, s.GeoTIFF.Normalize = path, []int64{tile, tile}, "per_band"
	return dataset.Open(s)
}

// Pass reads every tile once through the loader as epoch e, as training
// reads it, and returns n tiles over the time it took, a second.
func Pass(l *dataset.Loader, e, n int) (float64, error) {
	return Timed(n, func() error {
		it := l.Epoch(e)
		defer it.Close()
		for {
			b, err := it.Next(context.Background())
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			it.Release(b)
		}
	})
}

// Timed runs f and returns n over the seconds it took (0 on an error).
func Timed(n int, f func() error) (float64, error) {
	t0 := time.Now()
	if err := f(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}
