package torch

import (
	"math"
	"os"
	osexec "os/exec"
	"testing"

	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/run"
)

// TestEfficientNetOpsAgree trains small models of EfficientNet's layers on
// both engines in lockstep (trainInLockstep): silu (also as swish, and
// fused after a batchnorm), hardswish, se, and drop_path at p 0 (the
// engines draw stochastic depth from different generators).
func TestEfficientNetOpsAgree(t *testing.T) {
	py := testPython(t)
	models := map[string]string{
		"se":             "input [3, 8, 8]\n  x = conv 8 k3 pad1\n  conv 8 k3 pad1 groups 8 -> silu -> se squeeze 2 -> conv 8 k1 -> add x -> se ratio 2 -> conv 1 k1",
		"silu_hardswish": "input [3, 8, 8]\n  conv 8 k3 pad1 bias false -> batchnorm -> silu -> conv 8 k3 pad1 groups 8 -> swish -> conv 6 k1 -> hardswish -> conv 1 k1",
		"drop_path":      "input [3, 8, 8]\n  x = conv 8 k3 pad1\n  conv 8 k3 pad1 -> silu -> drop_path 0 -> add x -> conv 1 k1",
	}
	for name, body := range models {
		t.Run(name, func(t *testing.T) { trainInLockstep(t, py, name, "[3, 8, 8]", body) })
	}
}

// TestDropPathEvalAgrees: with p 0.5, both engines evaluate a model as
// the identity would, from the same state; and the torch engine's module
// in training keeps or zeroes each sample whole, scaling the kept by 2.
func TestDropPathEvalAgrees(t *testing.T) {
	py := testPython(t)
	src := "pipeline p\nsource s synthetic { samples 16  shape [3, 6, 6] }\nmodel m {\n  input [3, 6, 6]\n  x = conv 4 k3 pad1\n  conv 4 k3 pad1 -> drop_path 0.5 -> add x -> conv 1 k1\n}\ntrain { epochs 1  batch 4  optimizer adam lr 1e-2  loss mse }\n"
	prog, p, g := loadSrc(t, "drop_path.pipe", []byte(src))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	nm, err := native.Backend{}.Build(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nm.Close()
	tm := buildTorch(t, g, cfg, Backend{Python: py})
	if err := tm.SetState(nm.State()); err != nil {
		t.Fatal(err)
	}
	b := randomBatch(g, "mse", 4, 1)
	out, out2 := make([]float32, 4*36), make([]float32, 4*36)
	if _, err := nm.Eval(b, out); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Eval(b, out2); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if math.Abs(float64(out[i]-out2[i])) > 1e-5*(1+math.Abs(float64(out[i]))) {
			t.Fatalf("output %d: native %v, torch %v", i, out[i], out2[i])
		}
	}
	check := `
import torch
from pipe_torch.modules import DropPath
m = DropPath(0.5).train()
torch.manual_seed(0)
v = m(torch.ones(256, 3, 4, 4)).flatten(1)
assert ((v == 0).all(1) | (v == 2).all(1)).all(), "a sample is neither dropped nor kept whole"
assert 0.35 < (v[:, 0] == 0).float().mean().item() < 0.65
assert torch.equal(m.eval()(v), v)
`
	cmd := osexec.Command(py, "-c", check)
	cmd.Dir = "."
	cmd.Env = append(os.Environ(), "PYTHONPATH=.")
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("DropPath: %v\n%s", err, o)
	}
}
