package torch

import (
	"strings"
	"testing"

	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/run"
)

// TestCompileFailsAtFirstStep: torch.compile fails lazily, at the first
// call of the compiled model (a stand-in that fails as Triton does when
// it cannot build its launcher). The run goes on eagerly from the state
// before that call, trains the losses of an eager run, and says why in
// how the plan was applied.
func TestCompileFailsAtFirstStep(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "smallconv.pipe", []byte(smallConv), planner.WithEngine("torch"))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	eager := buildTorch(t, g, cfg, Backend{Python: py})
	t.Setenv("PIPE_TORCH_FAKE_COMPILE", "fail")
	cfg.Engine.Compile = true
	compiled := buildTorch(t, g, cfg, Backend{Python: py})
	if got := compiled.Applied()["compile"]; got != "torch.compile" {
		t.Fatalf("compile applied as %q before the first step", got)
	}
	for s := uint64(1); s <= 3; s++ {
		b := randomBatch(g, cfg.Loss.Kind, 8, s)
		var losses [2]float64
		for i, m := range []*model{eager, compiled} {
			if err := m.QueueTrain(b, 1, true, true); err != nil {
				t.Fatalf("step %d: %v", s, err)
			}
			if err := m.QueueStep(0, p.Optimizer.LR); err != nil {
				t.Fatal(err)
			}
			r, err := m.Results(true)
			if err != nil {
				t.Fatalf("step %d: %v", s, err)
			}
			losses[i] = r[len(r)-1].Losses[0]
		}
		if losses[0] != losses[1] {
			t.Errorf("step %d: loss %.8g eager, %.8g after the failed compile", s, losses[0], losses[1])
		}
	}
	got := compiled.Applied()["compile"]
	if !strings.Contains(got, "eager (torch.compile failed at the first step") || !strings.Contains(got, "fake compile failure") {
		t.Errorf("compile applied as %q", got)
	}
}
