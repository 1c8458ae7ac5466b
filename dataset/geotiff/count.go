//go:build cgo

package geotiff

import (
	"fmt"

	"github.com/airbusgeo/godal"

	"pipe/spec"
)

// Tiles is the number of tiles of a geotiff source's scene, read from its
// header: every stride pixels along both axes, the tile lying fully
// inside (an upper bound of what Open keeps: it drops tiles without a
// valid target pixel).
func Tiles(b *spec.Source, c *Options) (int, error) {
	gdalInit()
	p := b.GeoTIFF.Path
	ds, err := godal.Open(c.path(p), godal.RasterOnly(), godal.SkipWarnings)
	if err != nil {
		return 0, fileErr(c, p, err)
	}
	defer ds.Close()
	st := ds.Structure()
	th, tw, sh, sw := st.SizeY, st.SizeX, 1, 1 // no tile: the whole scene, once
	if v := b.GeoTIFF.Tile; len(v) == 2 {
		th, tw = int(v[0]), int(v[1])
		sh, sw = th, tw
		if s := b.GeoTIFF.Stride; s != nil {
			sh, sw = int(*s), int(*s)
		}
	}
	along := func(size, tile, stride int) int {
		if tile > size || stride < 1 {
			return 0
		}
		return (size-tile)/stride + 1
	}
	return along(st.SizeY, th, sh) * along(st.SizeX, tw, sw), nil
}

// Resident is what an opened geotiff source keeps in memory (for
// data.ResidentBytes), in bytes and in words: the scene's validity mask,
// the warped target, and the block cache (the direct reader's,
// blockcache.go, or GDAL's), bounded by the bytes of the rasters it reads.
func Resident(b *spec.Source, c *Options) (int64, string, error) {
	gdalInit()
	size := func(p string) (w, h, bytes int64, err error) {
		ds, err := godal.Open(c.path(p), godal.RasterOnly(), godal.SkipWarnings)
		if err != nil {
			return 0, 0, 0, fileErr(c, p, err)
		}
		defer ds.Close()
		st := ds.Structure()
		w, h = int64(st.SizeX), int64(st.SizeY)
		return w, h, w * h * int64(st.NBands) * int64(st.DataType.Size()), nil
	}
	w, h, raster, err := size(b.GeoTIFF.Path)
	if err != nil {
		return 0, "", err
	}
	bytes := w*h + raster
	what := fmt.Sprintf("a %dx%d scene's mask and up to its %d bytes in the block cache", w, h, raster)
	if tp := b.GeoTIFF.Target; tp != "" {
		_, _, traster, err := size(tp)
		if err != nil {
			return 0, "", err
		}
		bytes += w*h*4 + traster
		what += fmt.Sprintf(", the target warped onto it (float32) and up to its %d bytes cached", traster)
	}
	return bytes, what, nil
}

// Size is the width and height in pixels of a geotiff source's scene,
// read from its header.
func Size(b *spec.Source, c *Options) (w, h int64, err error) {
	gdalInit()
	p := b.GeoTIFF.Path
	ds, err := godal.Open(c.path(p), godal.RasterOnly(), godal.SkipWarnings)
	if err != nil {
		return 0, 0, fileErr(c, p, err)
	}
	defer ds.Close()
	st := ds.Structure()
	return int64(st.SizeX), int64(st.SizeY), nil
}
