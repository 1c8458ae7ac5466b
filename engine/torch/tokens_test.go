package torch

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/run"
)

// TestTokenOpsAgree: the native engine's token ops and attention compute
// what the torch engine's modules (nn.MultiheadAttention, nn.LayerNorm,
// ...) compute from the same weights: the outputs of an evaluation, and
// one SGD step at lr 1, whose change of each parameter is its gradient,
// each within 1e-4 of the tensor's largest magnitude.
func TestTokenOpsAgree(t *testing.T) {
	py := testPython(t)
	const tol = 1e-4
	for _, c := range []struct{ name, input, model string }{
		{"vit", "[3, 8, 8]", "x = patches 2 dim 8 -> class_token -> pos_embed\n  y = layernorm -> attention heads 2 -> add x\n  layernorm -> dense 16 -> gelu -> dense 8 -> add y -> layernorm -> select_token -> dense 3"},
		{"causal_mean", "[2, 8, 8]", "patches 4 dim 6 -> pos_embed -> attention heads 3 causal -> mean_tokens -> dense 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := fmt.Sprintf("pipeline p\nsource d synthetic { samples 16  shape %s  classes 3 }\nmodel m {\n  input %s\n  %s\n}\ntrain { epochs 1  batch 4  optimizer sgd lr 1  loss mse }\n", c.input, c.input, c.model)
			native, tm, worst, before, _ := lockstepPair(t, c.name, src, py)
			sn, st := native.State(), tm.State()
			checked := 0
			for _, x := range before.Tensors {
				if strings.HasPrefix(x.Name, "optimizer.") {
					continue
				}
				a, b := sn.Lookup(x.Name), st.Lookup(x.Name)
				if a == nil || b == nil {
					t.Fatalf("%s is missing from a state", x.Name)
				}
				ga, gb := make([]float32, len(x.Data)), make([]float32, len(x.Data))
				for i, v := range x.Data {
					ga[i], gb[i] = a.Data[i]-v, b.Data[i]-v
				}
				d := relDiff(ga, gb)
				if d > tol {
					t.Errorf("%s: gradients differ by %.2g of their largest", x.Name, d)
				}
				worst = math.Max(worst, d)
				checked++
			}
			if checked < 6 {
				t.Errorf("%d parameters compared", checked)
			}
			t.Logf("%d tensors: worst difference %.2g of a tensor's largest", checked, worst)
		})
	}
}

// relDiff is the largest |a−b| over the largest |a|.
func relDiff(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		num = math.Max(num, math.Abs(float64(a[i]-b[i])))
		den = math.Max(den, math.Abs(float64(a[i])))
	}
	if den == 0 {
		return num
	}
	return num / den
}

// lockstepPair builds the model of src on both engines from the native
// engine's initial state, compares their evaluation outputs on one random
// batch (failing past pairTol), then takes one SGD step on that batch with
// each. It returns both models, the outputs' difference, the state before
// the step and the two losses.
func lockstepPair(t *testing.T, name, src, py string) (nm, tm engine.Model, worst float64, before engine.State, losses [2]float64) {
	t.Helper()
	prog, p, g := loadSrc(t, name+".pipe", []byte(src))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads = 4, 2
	var err error
	nm, err = native.Backend{}.Build(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nm.Close() })
	tm = buildTorch(t, g, cfg, Backend{Python: py})
	if err := tm.SetState(nm.State()); err != nil {
		t.Fatal(err)
	}
	b := randomBatch(g, "mse", 4, 7)
	size := 4 * int(g.Node(g.Output).Out[0])
	on, ot := make([]float32, size), make([]float32, size)
	if _, err := nm.Eval(b, on); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Eval(b, ot); err != nil {
		t.Fatal(err)
	}
	worst = relDiff(on, ot)
	if worst > pairTol {
		t.Errorf("outputs differ by %.2g of their largest: native %v, torch %v", worst, on, ot)
	}
	before = nm.State()
	for i, m := range []engine.Model{nm, tm} {
		m.ZeroGrad()
		l, err := m.TrainStep(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		losses[i] = l
		if err := m.Step(1); err != nil {
			t.Fatal(err)
		}
	}
	return nm, tm, worst, before, losses
}

// pairTol is how far lockstepPair lets the two engines' outputs be apart,
// relative to the largest output.
const pairTol = 1e-4
