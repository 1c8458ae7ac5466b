//go:build cgo

package data

import (
	"github.com/airbusgeo/godal"

	"pipe/lang"
)

// countTiles is the number of tiles of a raster source's scene: every
// stride pixels along both axes, the tile lying fully inside.
func countTiles(b *lang.Block, c *config) (int, error) {
	gdalInit()
	p := strField(b, "path")
	ds, err := godal.Open(c.path(p), godal.RasterOnly(), godal.SkipWarnings)
	if err != nil {
		return 0, fileErr(c, p, err)
	}
	defer ds.Close()
	st := ds.Structure()
	th, tw, sh, sw := st.SizeY, st.SizeX, 1, 1 // no tile: the whole scene, once
	if v := b.Field("tile").First(); v != nil && len(v.Dims) == 2 {
		th, tw = int(v.Dims[0]), int(v.Dims[1])
		sh, sw = th, tw
		if s := b.Arg("tile", "stride"); s != nil {
			sh, sw = int(s.Int), int(s.Int)
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
