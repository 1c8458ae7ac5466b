package torch

import (
	"math"
	"testing"

	"pipe/internal/progtest"
	"pipe/run"
)

// maskPipe regresses a value per pixel, as olinda does: a masked mean
// squared error over the valid pixels.
const maskPipe = `pipeline masked
seed 3
source s synthetic { samples 64  shape [2, 6, 6]  seed 5 }
model net {
  input [2, 6, 6]
  conv 4 k3 pad1 -> relu -> conv 1 k1
}
train { epochs 1  batch 8  optimizer sgd lr 0.05  loss mse }
`

// TestDataParallelWeighsMaskedLossesByValidPositions trains a masked
// per-pixel loss over two ranks of 4 whose halves hold very different
// numbers of valid pixels (the first sees nearly all, the second few),
// and once in one process of 8: the step losses and the parameters agree
// within 1e-5, as they do only when each rank's mean counts by its valid
// pixels (an even mean of the two ranks' means, DDP's own, is off by
// 1e-2 and more here).
func TestDataParallelWeighsMaskedLossesByValidPositions(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "masked.pipe", []byte(maskPipe))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Threads = 1
	one := cfg
	one.Batch = 8
	two := cfg
	two.Batch = 4
	two.Engine.WorldSize = 2
	single := buildTorch(t, g, one, Backend{Python: py})
	ddp := buildTorch(t, g, two, Backend{Python: py, NProcPerNode: 2, MasterPort: freePort(t)})
	for step := range 6 {
		b := randomBatch(g, cfg.Loss.Kind, 8, uint64(300+step))
		per := len(b.Y) / b.N
		b.Mask = make([]float32, len(b.Y))
		for i := range b.Mask {
			// Samples 0-3 (rank 0's): 35 of 36 pixels valid; 4-7: 3 of 36.
			if s, px := i/per, i%per; (s < 4 && px%36 != 7) || (s >= 4 && px%12 == 0) {
				b.Mask[i] = 1
			}
		}
		var losses [2]float64
		for i, m := range []*model{single, ddp} {
			if err := m.QueueTrain(b, 1, true, true); err != nil {
				t.Fatal(err)
			}
			if err := m.QueueStep(0, 0.05); err != nil {
				t.Fatal(err)
			}
			r, err := m.Results(true)
			if err != nil {
				t.Fatal(err)
			}
			losses[i] = r[0].Losses[0]
		}
		if d := math.Abs(losses[1]-losses[0]) / losses[0]; d > 1e-5 {
			t.Errorf("step %d: loss %.7g in one process of 8, %.7g over two ranks of 4", step+1, losses[0], losses[1])
		}
	}
	want, got := single.State(), ddp.State()
	var worst float64
	for _, w := range want.Tensors {
		if s := got.Lookup(w.Name); s != nil && len(s.Data) == len(w.Data) {
			for i := range w.Data {
				worst = math.Max(worst, math.Abs(float64(w.Data[i]-s.Data[i])))
			}
		}
	}
	if worst > 1e-5 {
		t.Errorf("parameters differ from one process's by up to %.2e", worst)
	}
}
