package dataset

import (
	"fmt"
	"math"
	"sync"
)

// Predicting over a scene: cut it into overlapping windows (Windows), run
// the model on each (WindowSet feeds them through a Loader), accumulate
// the outputs with a Blender, and write the result on the scene's grid
// (WritePrediction).
//
// The Blender weighs each window's output by a separable cosine (Hann)
// ramp, w(i) = sin²(π(i + ½)/n) along each axis: highest at the window's
// centre, close to 0 at its edges, never 0. The result is Σ w·p / Σ w per
// pixel, so where windows overlap the output fades from one window into
// the next instead of jumping at a window's edge (no seams), and where
// only one window covers a pixel its output is kept as it is.

// Windows returns square tile×tile windows that cover a width×height
// raster, neighbours overlapping by overlap pixels (at least; the last
// row and column are moved back to end at the raster's edge, so they may
// overlap more). Every window lies inside the raster, except along an
// axis shorter than tile, where the single window starts at 0 and reaches
// past the edge. Windows are in row-major order. A fractional overlap f
// (predict's overlap field) is overlap = round(f·tile).
func Windows(width, height, tile, overlap int) []Window {
	if width < 1 || height < 1 || tile < 1 {
		return nil
	}
	ys, xs := starts(height, tile, overlap), starts(width, tile, overlap)
	out := make([]Window, 0, len(ys)*len(xs))
	for _, y := range ys {
		for _, x := range xs {
			out = append(out, Window{X: x, Y: y, W: tile, H: tile})
		}
	}
	return out
}

func starts(n, tile, overlap int) []int {
	if n <= tile {
		return []int{0}
	}
	step := max(tile-max(overlap, 0), 1)
	var s []int
	for x := 0; x+tile < n; x += step {
		s = append(s, x)
	}
	return append(s, n-tile)
}

// Blender accumulates overlapping window predictions into one raster of
// bands × height × width (band-sequential). It is safe for concurrent
// Add calls.
type Blender struct {
	w, h, bands int
	mu          sync.Mutex
	acc, wsum   []float32
	ramps       map[int][]float32
}

// NewBlender returns an empty blender for a width×height raster with
// bands output bands.
func NewBlender(width, height, bands int) *Blender {
	return &Blender{w: width, h: height, bands: bands,
		acc:   make([]float32, bands*width*height),
		wsum:  make([]float32, width*height),
		ramps: map[int][]float32{}}
}

func (b *Blender) ramp(n int) []float32 {
	if r, ok := b.ramps[n]; ok {
		return r
	}
	r := make([]float32, n)
	for i := range r {
		s := math.Sin(math.Pi * (float64(i) + 0.5) / float64(n))
		r[i] = float32(s * s)
	}
	b.ramps[n] = r
	return r
}

// Add accumulates a window's prediction, bands × win.H × win.W
// (band-sequential, as the model's output for one sample). Pixels of the
// window outside the raster are ignored.
func (b *Blender) Add(win Window, pred []float32) error {
	plane := win.W * win.H
	if len(pred) < b.bands*plane {
		return fmt.Errorf("blender: the prediction holds %d values, a %dx%d window of %d bands needs %d", len(pred), win.H, win.W, b.bands, b.bands*plane)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ry, rx := b.ramp(win.H), b.ramp(win.W)
	for r := range win.H {
		y := win.Y + r
		if y < 0 || y >= b.h {
			continue
		}
		for c := range win.W {
			x := win.X + c
			if x < 0 || x >= b.w {
				continue
			}
			wt := ry[r] * rx[c]
			p := y*b.w + x
			b.wsum[p] += wt
			for k := range b.bands {
				b.acc[k*b.w*b.h+p] += wt * pred[k*plane+r*win.W+c]
			}
		}
	}
	return nil
}

// Result returns the blended raster, bands × height × width; pixels no
// window covered are NaN. It is computed in place of the sums (a scene
// of bands × height × width is held once, not twice): the blender takes
// no Add after it.
func (b *Blender) Result() []float32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.acc
	n := b.w * b.h
	for k := range b.bands {
		for p := range n {
			if b.wsum[p] == 0 {
				out[k*n+p] = float32(math.NaN())
			} else {
				out[k*n+p] = b.acc[k*n+p] / b.wsum[p]
			}
		}
	}
	return out
}
