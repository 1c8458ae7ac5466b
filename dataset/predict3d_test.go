package dataset

import (
	"math"
	"testing"
)

// TestBlender3 cuts a volume into overlapping windows, gives each window
// a prediction that is a function of the global voxel (so every window
// agrees where they overlap) plus a per-window offset, and checks that the
// windows cover every voxel, that agreeing windows blend to the value
// itself, and that disagreeing ones blend to a weighted mean between
// their values that moves smoothly.
func TestBlender3(t *testing.T) {
	ext, win := [3]int{5, 9, 10}, [3]int{3, 4, 4}
	origins := Windows3(ext, win, [3]int{1, 2, 2})
	if len(origins) != 2*4*4 { // depth 0, 2; rows 0, 2, 4, 5; columns 0, 2, 4, 6
		t.Fatalf("%d windows: %v", len(origins), origins)
	}
	f := func(z, y, x int) float32 { return float32(100*z + 10*y + x) }
	for _, offset := range []bool{false, true} {
		b := NewBlender3(ext, 2)
		per := win[0] * win[1] * win[2]
		for i, o := range origins {
			p := make([]float32, 2*per)
			for z := range win[0] {
				for y := range win[1] {
					for x := range win[2] {
						q := (z*win[1]+y)*win[2] + x
						p[q] = f(o[0]+z, o[1]+y, o[2]+x)
						p[per+q] = -p[q]
						if offset {
							p[q] += float32(i % 2)
						}
					}
				}
			}
			if err := b.Add(o, win, p); err != nil {
				t.Fatal(err)
			}
		}
		got := b.Result()
		n := ext[0] * ext[1] * ext[2]
		for z := range ext[0] {
			for y := range ext[1] {
				for x := range ext[2] {
					p := (z*ext[1]+y)*ext[2] + x
					v, want := got[p], f(z, y, x)
					if math.IsNaN(float64(v)) {
						t.Fatalf("voxel %d,%d,%d not covered", z, y, x)
					}
					if !offset && (math.Abs(float64(v-want)) > 1e-3 || math.Abs(float64(got[n+p]+want)) > 1e-3) {
						t.Fatalf("voxel %d,%d,%d: %v, %v; want %v", z, y, x, v, got[n+p], want)
					}
					if offset && (v < want-1e-3 || v > want+1+1e-3) {
						t.Fatalf("voxel %d,%d,%d: %v outside [%v, %v]", z, y, x, v, want, want+1)
					}
				}
			}
		}
	}
	if err := NewBlender3(ext, 2).Add([3]int{}, win, make([]float32, 10)); err == nil {
		t.Error("a short prediction is accepted")
	}
}
