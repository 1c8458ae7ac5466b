package torch

import "testing"

// TestEfficientNetOpsAgree trains small models of EfficientNet's layers on
// both engines in lockstep (trainInLockstep): silu (also as swish, and
// fused after a batchnorm), hardswish and se.
func TestEfficientNetOpsAgree(t *testing.T) {
	py := testPython(t)
	models := map[string]string{
		"se":             "input [3, 8, 8]\n  x = conv 8 k3 pad1\n  conv 8 k3 pad1 groups 8 -> silu -> se squeeze 2 -> conv 8 k1 -> add x -> se ratio 2 -> conv 1 k1",
		"silu_hardswish": "input [3, 8, 8]\n  conv 8 k3 pad1 bias false -> batchnorm -> silu -> conv 8 k3 pad1 groups 8 -> swish -> conv 6 k1 -> hardswish -> conv 1 k1",
	}
	for name, body := range models {
		t.Run(name, func(t *testing.T) { trainInLockstep(t, py, name, "[3, 8, 8]", body) })
	}
}
