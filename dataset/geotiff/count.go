//go:build cgo

package geotiff

import (
	"fmt"

	"pipe/dataset/remote"
	"pipe/spec"
)

// Tiles is the number of tiles of a geotiff source's scene, read from its
// header: every stride pixels along both axes, the tile lying fully
// inside (an upper bound of what Open keeps: it drops tiles without a
// valid target pixel).
func Tiles(b *spec.Source, c *Options) (int, error) {
	gdalInit()
	_, ds, err := open(c, b.GeoTIFF.Path)
	if err != nil {
		return 0, err
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
	var remoteBytes int64 // the remote cache's share, for sources read from URLs
	size := func(p string) (w, h, bytes int64, err error) {
		r, ds, err := open(c, p)
		if err != nil {
			return 0, 0, 0, err
		}
		defer ds.Close()
		st := ds.Structure()
		w, h = int64(st.SizeX), int64(st.SizeY)
		if r.obj != nil {
			remoteBytes += r.obj.Size()
		}
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
	if remoteBytes > 0 {
		remoteBytes = min(remoteBytes, remote.CacheBytes()) // one cache for all objects
		bytes += remoteBytes
		what += fmt.Sprintf(", and up to %d bytes of the objects' blocks in the remote cache (PIPE_REMOTE_CACHE_MB)", remoteBytes)
	}
	return bytes, what, nil
}

// Size is the width and height in pixels of a geotiff source's scene,
// read from its header.
func Size(b *spec.Source, c *Options) (w, h int64, err error) {
	gdalInit()
	_, ds, err := open(c, b.GeoTIFF.Path)
	if err != nil {
		return 0, 0, err
	}
	defer ds.Close()
	st := ds.Structure()
	return int64(st.SizeX), int64(st.SizeY), nil
}

// SampleShape is a tile's shape as Open's XShape gives it, from the
// headers of the scene and the target (nothing is read past them): the
// input bands by the tile, less the downsample. Its errors are Open's
// for the same fault (a missing file, a band or tile the scene does not
// have), on the same field, so that pipe plan refuses what the run would.
func SampleShape(b *spec.Source, c *Options) ([]int64, error) {
	if c == nil {
		c = &Options{}
	}
	gdalInit()
	r, h, err := open(c, b.GeoTIFF.Path)
	if err != nil {
		return nil, blockErr(b, "path", err)
	}
	defer h.Close()
	st := h.Structure()
	d := &Dataset{path: r.shown, grid: GeoGrid{Width: st.SizeX, Height: st.SizeY}}
	if err := d.pickBands(b, st.NBands); err != nil {
		return nil, err
	}
	if _, err := d.pickTiles(b); err != nil {
		return nil, err
	}
	if d.nT > 0 && d.th%d.down+d.tw%d.down != 0 {
		return nil, blockErr(b, "downsample", fmt.Errorf("tiles of %dx%d do not divide by downsample %d", d.th, d.tw, d.down))
	}
	if tp := b.GeoTIFF.Target; tp != "" {
		_, t, err := open(c, tp)
		if err != nil {
			return nil, blockErr(b, "target", err)
		}
		t.Close()
	}
	return d.XShape(), nil
}
