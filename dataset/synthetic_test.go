package dataset

import (
	"math"
	"pipe/dataset/internal/datatest"
	"pipe/internal/progtest"
	"slices"
	"testing"
)

func TestSyntheticBlobs(t *testing.T) {
	b := progtest.Source(t, `source s synthetic { samples 2000  shape [64]  classes 10  seed 11 }`)
	ds, err := Open(b)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 2000 || ds.Classes() != 10 || !slices.Equal(ds.XShape(), []int64{64}) {
		t.Fatalf("Len %d Classes %d XShape %v", ds.Len(), ds.Classes(), ds.XShape())
	}
	again, _ := Open(b)
	xs, ys, _ := datatest.ReadAll(t, ds)
	xs2, _, _ := datatest.ReadAll(t, again)
	if !slices.Equal(xs[7], xs2[7]) {
		t.Fatal("the same seed gave different samples")
	}
	// The nearest centre is right about 98% of the time; every class
	// occurs.
	centres := ds.(*syntheticDataset).Centres()
	right := 0
	counts := make([]int, 10)
	for i, x := range xs {
		best, bestD := -1, math.Inf(1)
		for k := range 10 {
			d := 0.0
			for j, v := range x {
				dv := float64(v - centres[k*64+j])
				d += dv * dv
			}
			if d < bestD {
				best, bestD = k, d
			}
		}
		if float32(best) == ys[i][0] {
			right++
		}
		counts[int(ys[i][0])]++
	}
	t.Logf("nearest-centre accuracy %.4f", float64(right)/2000)
	if acc := float64(right) / 2000; acc < 0.95 || acc > 0.999 {
		t.Fatalf("nearest-centre accuracy %.3f, want about 0.98", acc)
	}
	for k, n := range counts {
		if n < 150 {
			t.Fatalf("class %d has %d samples", k, n)
		}
	}
}

func TestSyntheticRegression(t *testing.T) {
	ds, err := Open(progtest.Source(t, `source s synthetic { samples 500  shape [4, 4] }`), WithSeed(9))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Classes() != 0 || !slices.Equal(ds.YShape(), []int64{1}) {
		t.Fatalf("Classes %d YShape %v", ds.Classes(), ds.YShape())
	}
	w := ds.(*syntheticDataset).Centres()
	xs, ys, _ := datatest.ReadAll(t, ds)
	var se, vy float64
	for i, x := range xs {
		dot := 0.0
		for j, v := range x {
			dot += float64(w[j] * v)
		}
		se += (float64(ys[i][0]) - dot) * (float64(ys[i][0]) - dot)
		vy += float64(ys[i][0] * ys[i][0])
	}
	if mse := se / 500; mse > 0.02 || vy/500 < 0.3 {
		t.Fatalf("teacher's mse %.4f (want about 0.01), var y %.3f", mse, vy/500)
	}
}
