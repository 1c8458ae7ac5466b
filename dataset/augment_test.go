package dataset

import (
	"slices"
	"testing"

	"pipe/dataset/source"
)

func TestAugmentTransforms(t *testing.T) {
	a, err := newAugmenter([]string{"rot90"}, []int64{1, 3, 3}, []int64{1, 3, 3})
	if err != nil {
		t.Fatal(err)
	}
	p := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	q := slices.Clone(p)
	a.rotPlane(q, 1)
	if !slices.Equal(q, []float32{3, 6, 9, 2, 5, 8, 1, 4, 7}) {
		t.Fatalf("quarter turn: %v", q)
	}
	for range 3 {
		a.rotPlane(q, 1)
	}
	if !slices.Equal(q, p) {
		t.Fatalf("four quarter turns: %v", q)
	}
	a.flipPlaneH(q)
	if !slices.Equal(q, []float32{3, 2, 1, 6, 5, 4, 9, 8, 7}) {
		t.Fatalf("flip_h: %v", q)
	}
	q = slices.Clone(p)
	a.flipPlaneV(q)
	if !slices.Equal(q, []float32{7, 8, 9, 4, 5, 6, 1, 2, 3}) {
		t.Fatalf("flip_v: %v", q)
	}
	q = slices.Clone(p)
	a.shiftPlane(q, 1, -1, 0)
	if !slices.Equal(q, []float32{0, 0, 0, 2, 3, 0, 5, 6, 0}) {
		t.Fatalf("crop shift: %v", q)
	}
}

// x, y and mask move together, and padding is masked out.
func TestAugmentTargetsFollow(t *testing.T) {
	a, err := newAugmenter([]string{"flip_h", "flip_v", "rot90", "crop"}, []int64{2, 8, 8}, []int64{1, 8, 8})
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for s := range 50 {
		x, y, m := make([]float32, 128), make([]float32, 64), make([]float32, 64)
		for p := range 64 {
			x[p], x[64+p], y[p], m[p] = float32(p+1), float32(-p-1), float32(p+1), 1
		}
		a.apply(source.NewRNG(uint64(s)), x, y, m)
		for p := range 64 {
			if x[p] != y[p] || x[64+p] != -y[p] || (m[p] == 0) != (y[p] == 0) {
				t.Fatalf("seed %d pixel %d: x %v %v y %v mask %v", s, p, x[p], x[64+p], y[p], m[p])
			}
		}
		if y[0] != 1 {
			moved++
		}
	}
	if moved < 30 {
		t.Fatalf("only %d of 50 samples changed", moved)
	}
	if _, err := newAugmenter([]string{"rot90"}, []int64{3, 8, 6}, nil); err == nil {
		t.Fatal("rot90 accepted 8x6 samples")
	}
	if _, err := newAugmenter([]string{"flip_h"}, []int64{5}, nil); err == nil {
		t.Fatal("flip_h accepted vectors")
	}
}
