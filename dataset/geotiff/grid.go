package geotiff

// Window is a rectangle of pixels: X is the first column, Y the first
// row. A window may reach past the raster's edge (data.Windows does that
// for a raster smaller than a tile); ReadWindow fills such pixels with 0
// and mask 0.
type Window struct {
	X, Y, W, H int
}

// GeoGrid is where a raster lies: its size, its affine geotransform
// (GDAL's order: x0, dx/dcol, dx/drow, y0, dy/dcol, dy/drow) and its CRS
// as WKT. Predictions are written on the grid of the source they were
// made from.
type GeoGrid struct {
	Width, Height int
	GeoTransform  [6]float64
	Projection    string
}

// Finer is the grid f times finer than g over the same extent: f×f
// pixels for each of g's, the geotransform's pixel size divided by f,
// the same origin and CRS.
func (g GeoGrid) Finer(f int) GeoGrid {
	out := g
	out.Width, out.Height = g.Width*f, g.Height*f
	for _, i := range []int{1, 2, 4, 5} {
		out.GeoTransform[i] = g.GeoTransform[i] / float64(f)
	}
	return out
}
