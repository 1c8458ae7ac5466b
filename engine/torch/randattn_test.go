package torch

import (
	"fmt"
	"math"
	"testing"
)

// TestRandomAttentionAgrees: random_attention (Panther's
// RandMultiHeadAttention) computes the same on both engines from the same
// tensors (the torch engine starts from the native engine's, the random
// features included): the outputs of an evaluation, the loss of a training
// step, and one SGD step at lr 1 (each parameter moves by minus its
// gradient), each within 1e-4 of the tensor's largest magnitude; the
// features do not move on either engine.
func TestRandomAttentionAgrees(t *testing.T) {
	py := testPython(t)
	const tol = 1e-4
	for _, c := range []struct{ name, model string }{
		{"softmax", "x = patches 2 dim 8 -> class_token -> pos_embed\n  layernorm -> random_attention heads 2 features 6 -> add x -> layernorm -> select_token -> dense 3"},
		{"softmax_causal", "patches 2 dim 6 -> pos_embed -> random_attention heads 3 features 5 causal -> mean_tokens -> dense 3"},
		{"relu", "patches 2 dim 8 -> random_attention heads 2 features 7 kernel relu -> mean_tokens -> dense 3"},
		{"relu_causal", "patches 4 dim 8 -> pos_embed -> random_attention heads 4 features 3 causal kernel relu -> mean_tokens -> dense 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := fmt.Sprintf("pipeline p\nsource d synthetic { samples 16  shape [3, 8, 8]  classes 3 }\nmodel m {\n  input [3, 8, 8]\n  %s\n}\ntrain { epochs 1  batch 4  optimizer sgd lr 1  loss mse }\n", c.model)
			native, tm, worst, before, losses := lockstepPair(t, c.name, src, py)
			if math.Abs(losses[0]-losses[1]) > tol*math.Max(1, math.Abs(losses[0])) {
				t.Errorf("loss: native %.8g, torch %.8g", losses[0], losses[1])
			}
			sn, st := native.State(), tm.State()
			checked, fixed := 0, 0
			for _, x := range before.Tensors {
				a, bt := sn.Lookup(x.Name), st.Lookup(x.Name)
				if a == nil || bt == nil {
					if len(x.Name) > 10 && x.Name[:10] == "optimizer." {
						continue
					}
					t.Fatalf("%s is missing from a state", x.Name)
				}
				ga, gb := make([]float32, len(x.Data)), make([]float32, len(x.Data))
				for i, v := range x.Data {
					ga[i], gb[i] = a.Data[i]-v, bt.Data[i]-v
				}
				if d := relDiff(ga, gb); d > tol {
					t.Errorf("%s: gradients differ by %.2g of their largest", x.Name, d)
				} else {
					worst = math.Max(worst, d)
				}
				if len(x.Name) > 18 && x.Name[len(x.Name)-18:] == ".projection_matrix" {
					fixed++
					for i := range ga {
						if ga[i] != 0 || gb[i] != 0 {
							t.Fatalf("%s moved in a step", x.Name)
						}
					}
				}
				checked++
			}
			if checked < 10 || fixed != 1 {
				t.Errorf("%d tensors compared, %d random feature buffers", checked, fixed)
			}
			t.Logf("%d tensors: worst difference %.2g of a tensor's largest; loss %.6g", checked, worst, losses[0])
		})
	}
}
