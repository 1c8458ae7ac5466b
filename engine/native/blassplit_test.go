package native

import (
	"math"
	"testing"
)

// TestDenseOnly checks which graphs leave their products to OpenBLAS's
// threads: an MLP does, a CNN or a transformer does not.
func TestDenseOnly(t *testing.T) {
	if !denseOnly(graphOf(t, benchMLP)) {
		t.Error("the MLP is not dense-only")
	}
	for _, f := range []string{"fashion.pipe", "vit_fashion.pipe"} {
		if denseOnly(exampleGraph(t, f)) {
			t.Errorf("%s is dense-only", f)
		}
	}
}

// TestBLASSplitSameSteps trains the MLP for a few steps as denseOnly
// builds it (products on OpenBLAS's threads, the rest on one goroutine)
// and with everything split on a pool of two, from the same start, and
// checks the parameters end within float32 rounding of each other
// (OpenBLAS may block the sums differently, and the loss sums its rows
// in one part instead of two).
func TestBLASSplitSameSteps(t *testing.T) {
	if !blasThreadsSettable {
		t.Skip("no OpenBLAS in this build")
	}
	g := graphOf(t, benchMLP)
	cfg := cfgOf(64, "cross_entropy", "adam")
	cfg.Threads = 2
	run := func(openblas bool) *model {
		m := mustBuild(t, g, cfg)
		if m.gemmThreads != 2 || m.pool.n != 1 {
			t.Fatalf("a 2-thread MLP has %d OpenBLAS threads and a pool of %d", m.gemmThreads, m.pool.n)
		}
		if !openblas {
			m.pool.close()
			m.pool, m.gemmThreads = newPool(2), 0
		}
		for s := range 5 {
			bt := randomBatch(m, 64, uint64(s+1))
			m.ZeroGrad()
			if _, err := m.TrainStep(bt, 1); err != nil {
				t.Fatal(err)
			}
			if err := m.Step(1e-3); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	a, b := run(true), run(false)
	worst := 0.0
	for i, p := range a.params {
		q := b.params[i]
		for j := range p.data {
			d := math.Abs(float64(p.data[j]-q.data[j])) / (1e-3 + math.Abs(float64(q.data[j])))
			worst = max(worst, d)
		}
	}
	if worst > 1e-4 {
		t.Fatalf("parameters differ by %.3g (relative) after 5 steps", worst)
	}
	t.Logf("largest relative difference after 5 steps: %.3g", worst)
}
