package torch

import (
	"reflect"
	"strings"
	"testing"

	"pipe/dataset"
	"pipe/engine"
	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/run"
)

// TestOverflowedFP16StepIsSkipped: under fp16's loss scaling, a step whose
// scaled gradients overflow is the GradScaler's to skip (it lowers the
// scale), not a failure, with the loss read back at once as well. The
// test runs on a CPU with a stand-in GradScaler (PIPE_TORCH_FAKE_SCALER),
// whose first scale overflows: that step leaves the weights alone, and
// the next trains exactly as an unscaled model's first step on its batch.
func TestOverflowedFP16StepIsSkipped(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "smallconv.pipe", []byte(smallConv), planner.WithEngine("torch"))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	if cfg.Engine.LossReadback == "lagged" {
		t.Fatal("the CPU plan reads losses back lagged; this test is of the sync readback")
	}
	plain := buildTorch(t, g, cfg, Backend{Python: py})
	t.Setenv("PIPE_TORCH_FAKE_SCALER", "1")
	cfg.Engine.GradScaler = true
	scaled := buildTorch(t, g, cfg, Backend{Python: py})
	if a := scaled.Applied()["grad_scaler"]; !strings.Contains(a, "not fused") {
		t.Errorf("applied grad_scaler %q: on the CPU the optimizer is not fused, and scaler.step syncs", a)
	}
	step := func(m *model, b *dataset.Batch) float64 {
		t.Helper()
		m.ZeroGrad()
		loss, err := m.TrainStep(b, 1)
		if err != nil {
			t.Fatalf("an overflowed fp16 step failed the run: %v", err)
		}
		if err := m.Step(p.Optimizer.LR); err != nil {
			t.Fatalf("an overflowed fp16 step failed the run: %v", err)
		}
		return loss
	}
	b1, b2 := randomBatch(g, cfg.Loss.Kind, 8, 1), randomBatch(g, cfg.Loss.Kind, 8, 2)
	before := trained(scaled.State())
	step(scaled, b1) // the stand-in's first scale overflows
	if !reflect.DeepEqual(trained(scaled.State()), before) {
		t.Fatal("the overflowed step changed the weights or the optimizer's state")
	}
	if got, want := step(scaled, b2), step(plain, b2); got != want {
		t.Errorf("the step after the overflow: loss %.8g, unscaled %.8g", got, want)
	}
	if !reflect.DeepEqual(trained(scaled.State()), trained(plain.State())) {
		t.Error("after the overflowed step and one more, the weights differ from one unscaled step's")
	}
}

// trained are a state's tensors but the batchnorm statistics, which every
// forward pass moves, skipped step or not.
func trained(s engine.State) map[string][]float32 {
	out := map[string][]float32{}
	for _, t := range s.Tensors {
		if !strings.Contains(t.Name, "running_") {
			out[t.Name] = t.Data
		}
	}
	return out
}
