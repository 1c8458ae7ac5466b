package dataset

import (
	"math"
	"testing"
)

func TestWindows(t *testing.T) {
	for _, c := range []struct{ w, h, tile, overlap, n int }{
		{349, 352, 64, 16, 7 * 7}, // starts 0, 48, …, 240, then 285 / 288
		{64, 64, 64, 0, 1},
		{30, 20, 64, 8, 1}, // smaller than a tile: one window past the edge
		{100, 64, 32, 0, 4 * 2},
	} {
		wins := Windows(c.w, c.h, c.tile, c.overlap)
		if len(wins) != c.n {
			t.Fatalf("%+v: %d windows, want %d", c, len(wins), c.n)
		}
		covered := make([]int, c.w*c.h)
		for _, win := range wins {
			if win.W != c.tile || win.H != c.tile || win.X < 0 || win.Y < 0 {
				t.Fatalf("%+v: window %+v", c, win)
			}
			if (c.w >= c.tile && win.X+win.W > c.w) || (c.h >= c.tile && win.Y+win.H > c.h) {
				t.Fatalf("%+v: window %+v leaves the raster", c, win)
			}
			for y := win.Y; y < min(win.Y+win.H, c.h); y++ {
				for x := win.X; x < min(win.X+win.W, c.w); x++ {
					covered[y*c.w+x]++
				}
			}
		}
		for p, n := range covered {
			if n == 0 {
				t.Fatalf("%+v: pixel %d not covered", c, p)
			}
		}
	}
}

// blend predicts f through overlapping windows, each window's output
// being f plus that window's bias.
func blend(w, h, tile, overlap int, f func(x, y int) float32, bias func(i int) float32) []float32 {
	b := NewBlender(w, h, 2)
	for i, win := range Windows(w, h, tile, overlap) {
		pred := make([]float32, 2*win.W*win.H)
		for r := range win.H {
			for c := range win.W {
				v := f(win.X+c, win.Y+r) + bias(i)
				pred[r*win.W+c] = v
				pred[win.W*win.H+r*win.W+c] = -v
			}
		}
		b.Add(win, pred)
	}
	return b.Result()
}

func TestBlenderReproduces(t *testing.T) {
	const w, h = 75, 61
	noBias := func(int) float32 { return 0 }
	for name, f := range map[string]func(x, y int) float32{
		"constant": func(x, y int) float32 { return 3.25 },
		"smooth":   func(x, y int) float32 { return float32(math.Sin(float64(x)/9) + math.Cos(float64(y)/7)) },
	} {
		got := blend(w, h, 16, 5, f, noBias)
		for y := range h {
			for x := range w {
				want := f(x, y)
				if d := got[y*w+x] - want; math.Abs(float64(d)) > 1e-5 || got[w*h+y*w+x] != -got[y*w+x] {
					t.Fatalf("%s: pixel (%d,%d) = %v, want %v", name, x, y, got[y*w+x], want)
				}
			}
		}
	}
}

// Windows that disagree (each has its own bias) blend without seams: the
// largest step between neighbouring pixels is a fraction of what it is
// when each pixel simply takes the last window's value.
func TestBlenderNoSeams(t *testing.T) {
	const w, h, tile, overlap = 90, 90, 24, 12
	bias := func(i int) float32 { return float32((i*7919)%11) / 10 } // 0 … 1
	flat := func(x, y int) float32 { return 0 }
	got := blend(w, h, tile, overlap, flat, bias)
	last := make([]float32, w*h)
	for i, win := range Windows(w, h, tile, overlap) {
		for y := win.Y; y < win.Y+win.H; y++ {
			for x := win.X; x < win.X+win.W; x++ {
				last[y*w+x] = bias(i)
			}
		}
	}
	maxStep := func(img []float32) float64 {
		m := 0.0
		for y := range h {
			for x := range w {
				if x+1 < w {
					m = max(m, math.Abs(float64(img[y*w+x+1]-img[y*w+x])))
				}
				if y+1 < h {
					m = max(m, math.Abs(float64(img[(y+1)*w+x]-img[y*w+x])))
				}
			}
		}
		return m
	}
	seam, blended := maxStep(last), maxStep(got)
	if seam < 0.5 || blended > seam/4 {
		t.Fatalf("largest step: %.3f blended, %.3f pasted; want blended under a quarter", blended, seam)
	}
}
