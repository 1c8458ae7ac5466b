package dataset

import "pipe/dataset/geotiff"

// The parts of a raster source that need no GDAL: windows, grids, the
// Raster interface and the dataset of windows predict reads. The reader
// itself is package geotiff, built with cgo; without cgo a geotiff source
// is refused with a message.

// Window is a rectangle of pixels (geotiff.Window).
type Window = geotiff.Window

// GeoGrid is where a raster lies: its size, geotransform and CRS
// (geotiff.GeoGrid).
type GeoGrid = geotiff.GeoGrid

// Raster is what a geotiff dataset offers beyond Dataset, for predict.
type Raster interface {
	Dataset
	// Grid is the scene's grid.
	Grid() GeoGrid
	// Tile is sample i's window.
	Tile(i int) Window
	// ReadWindow reads any window of the scene as Read reads a tile: x
	// normalised [C, win.H, win.W]; y and mask [1, win.H, win.W] when
	// the source has a target (either may be nil to skip it).
	ReadWindow(win Window, x, y, mask []float32) error
	// Coverage is the fraction of the scene's pixels whose mask is 1
	// (valid scene and, with a target, valid warped target).
	Coverage() float64
	// Dropped is how many tiles were left out for having no valid
	// target pixel.
	Dropped() int
	// Valid reports whether the scene has data at column x, row y: every
	// selected band holds a value that is not its nodata.
	Valid(x, y int) bool
	// Straddling is how many tiles a split by blocks left out of both
	// parts for lying across a training and a validation block.
	Straddling() int
}

// SuperResolution is a raster whose inputs are a coarser copy of its
// targets (a geotiff source's downsample): Factor is that factor (1: the
// inputs are at the scene's resolution), and ReadInputs reads a window's
// input bands at the scene's own resolution, normalised as the training
// inputs are. A model trained on it makes from them a grid Factor times
// finer than the scene's (predict, InputWindowSet).
type SuperResolution interface {
	Factor() int
	ReadInputs(win Window, x []float32) error
}

// InputWindowSet is the dataset of the given windows of a
// super-resolution raster's inputs at the scene's resolution
// (SuperResolution.ReadInputs), in order; their targets read as 0.
func InputWindowSet(r Raster, wins []Window) Dataset {
	return &windowSet{r: r, wins: wins, inputs: true}
}

// WindowSet is the dataset of the given windows of a raster, in order:
// what predict feeds through a Loader. Sample i is ReadWindow(wins[i]);
// every window must have the same size.
func WindowSet(r Raster, wins []Window) Dataset {
	return &windowSet{r: r, wins: wins}
}

type windowSet struct {
	r      Raster
	wins   []Window
	inputs bool // InputWindowSet
}

func (s *windowSet) Len() int { return len(s.wins) }
func (s *windowSet) XShape() []int64 {
	c := s.r.XShape()[0]
	if len(s.wins) == 0 {
		return []int64{c, 0, 0}
	}
	return []int64{c, int64(s.wins[0].H), int64(s.wins[0].W)}
}
func (s *windowSet) YShape() []int64 {
	ys := s.r.YShape()
	if len(s.wins) == 0 {
		return []int64{ys[0], 0, 0}
	}
	return []int64{ys[0], int64(s.wins[0].H), int64(s.wins[0].W)}
}
func (s *windowSet) Classes() int  { return s.r.Classes() }
func (s *windowSet) HasMask() bool { return s.r.HasMask() }
func (s *windowSet) Close() error  { return nil }
func (s *windowSet) Read(i int, x, y, mask []float32) error {
	if sr, ok := s.r.(SuperResolution); ok && s.inputs {
		clear(y)
		clear(mask)
		return sr.ReadInputs(s.wins[i], x)
	}
	return s.r.ReadWindow(s.wins[i], x, y, mask)
}
