package torch

import (
	"strings"
	"testing"
	"time"

	"pipe/engine"
)

// TestProfileOnTorch trains a small CNN with a checkpoint segment on the
// torch engine with profiling on: every node has a forward span inside
// the call's clock, the nodes that take gradients backward spans, the
// recomputed nodes recompute spans, the loss its own; Eval times forward
// passes only; and off, nothing is kept.
func TestProfileOnTorch(t *testing.T) {
	py := testPython(t)
	src := `pipeline p
source s synthetic { samples 16  shape [1, 8, 8]  classes 3 }
model m {
  input [1, 8, 8]
  conv 4 k3 pad1 -> batchnorm -> relu -> maxpool 2
  conv 4 k3 pad1 -> relu
  flatten -> dense 3
}
train { epochs 1  batch 4  loss cross_entropy }
`
	_, _, g := loadSrc(t, "p.pipe", []byte(src))
	cfg := engine.Config{Batch: 4, Loss: engine.Loss{Kind: "cross_entropy"}, Optimizer: engine.Optimizer{Kind: "sgd"}, Device: "cpu", Threads: 1,
		Checkpoint: []engine.Segment{{From: 5, To: 6}}}
	var tm engine.Model = buildTorch(t, g, cfg, Backend{Python: py})
	pm := tm.Capabilities().Profile
	if pm == nil {
		t.Fatal("the torch engine has no Profile capability")
	}
	b := randomBatch(g, "cross_entropy", 4, 1)
	tm.ZeroGrad()
	if _, err := tm.TrainStep(b, 1); err != nil {
		t.Fatal(err)
	}
	if s := pm.Profile(); len(s) != 0 {
		t.Errorf("profiling off: %d spans", len(s))
	}
	pm.EnableProfile(true)
	tm.ZeroGrad()
	t0 := time.Now()
	if _, err := tm.TrainStep(b, 1); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	spans := pm.Profile()
	count := map[engine.Phase]map[string]int{}
	for _, s := range spans {
		if s.Start.Before(t0) || s.Start.Add(s.Dur).After(t1) || s.Dur < 0 {
			t.Errorf("%v %s: [%v, +%v] outside the call's [%v, %v]", s.Nodes, s.Phase, s.Start.Sub(t0), s.Dur, 0, t1.Sub(t0))
		}
		if count[s.Phase] == nil {
			count[s.Phase] = map[string]int{}
		}
		count[s.Phase][strings.Join(s.Nodes, "+")]++
	}
	if count[engine.PhaseLoss][""] < 2 {
		t.Errorf("loss spans (forward and backward): %v", count[engine.PhaseLoss])
	}
	for _, n := range g.Nodes {
		if count[engine.PhaseForward][n.Name] != 1 {
			t.Errorf("%s: %d forward spans", n.Name, count[engine.PhaseForward][n.Name])
		}
		if n.Params > 0 && count[engine.PhaseBackward][n.Name] == 0 {
			t.Errorf("%s has parameters and no backward span", n.Name)
		}
	}
	for _, id := range []int{5, 6} {
		if name := g.Nodes[id].Name; count[engine.PhaseRecompute][name] != 1 {
			t.Errorf("%s is recomputed: %d recompute spans", name, count[engine.PhaseRecompute][name])
		}
	}
	if _, err := tm.Eval(b, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range pm.Profile() {
		if s.Phase != engine.PhaseForward && s.Phase != engine.PhaseLoss {
			t.Errorf("Eval timed a %s pass of %v", s.Phase, s.Nodes)
		}
	}
	pm.EnableProfile(false)
	if _, err := tm.Eval(b, nil); err != nil {
		t.Fatal(err)
	}
	if s := pm.Profile(); len(s) != 0 {
		t.Errorf("profiling turned off: %d spans", len(s))
	}
}
