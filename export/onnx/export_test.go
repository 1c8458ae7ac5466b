package onnx_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/engine/native"
	"pipe/export/onnx"

	"pipe/engine/costs"
	"pipe/internal/onnxtest"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/planner"
	"pipe/run"
	"pipe/stdlib"
)

// trained builds the model of a pipeline as run.LoadTrained would from a
// checkpoint, from pipe's seeded initial weights perturbed (batchnorm's
// running statistics included, so that folding is exercised) instead of
// trained ones, evaluating batches of up to batch samples. A regression
// gets a target scaling, so the restoring Mul and Add are exercised.
func trained(t *testing.T, name string, src []byte, batch int) *run.Trained {
	t.Helper()
	f, ds := lang.Parse(name, src)
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatalf("%s does not check:\n%v", name, ds)
	}
	p, pds := planner.Plan(progtest.Decoded(t, prog), planner.WithCosts(costs.Engines()...), planner.WithSource(src), planner.WithDevice("cpu"), planner.WithBatch(4))
	if pds.HasErrors() || p == nil {
		t.Fatalf("%s does not plan:\n%v", name, pds)
	}
	g, gds := stdlib.BuildGraph(prog.Model(p.Model))
	if gds.HasErrors() {
		t.Fatalf("%s does not build:\n%v", name, gds)
	}
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads = batch, 1
	st, err := native.InitialState(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, ts := range st.Tensors {
		for i := range ts.Data {
			switch {
			case strings.HasPrefix(ts.Name, "optimizer."):
			case strings.HasSuffix(ts.Name, ".running_var"):
				ts.Data[i] = float32(0.5 + 1.5*r.Float64())
			case strings.HasSuffix(ts.Name, ".running_mean"):
				ts.Data[i] = float32(0.6 * (r.Float64() - 0.5))
			default:
				ts.Data[i] += float32(0.1 * (r.Float64() - 0.5))
			}
		}
	}
	m, err := native.Backend{}.Build(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.SetState(st); err != nil {
		t.Fatal(err)
	}
	tr := &run.Trained{Plan: p, Prog: progtest.Decoded(t, prog), Graph: g, Model: m, Config: cfg, State: st}
	tr.Info = run.TrainedInfo{Pipeline: p.Pipeline, ModelName: p.Model, InputShape: g.Input, OutputShape: m.OutShape(), Loss: p.Loss}
	switch p.Loss {
	case "mse", "mae", "huber":
		tr.Info.Target = &run.TargetScaling{Mean: []float64{3.5}, Std: []float64{2.25}}
	}
	return tr
}

func numel(s []int64) int {
	n := 1
	for _, d := range s {
		n *= int(d)
	}
	return n
}

func randomInput(n int, shape []int64, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	x := make([]float32, n*numel(shape))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// The same model exported at opset 18 (where ReduceMean takes its axes as
// an input) still matches, and opsets outside 17 to 21 are refused.
func TestOpsets(t *testing.T) {
	src := []byte(`pipeline tiny
source blobs synthetic { samples 64  shape [2, 8, 8]  classes 3  seed 5 }
model small {
  input [2, 8, 8]
  conv 4 k3 pad1 -> batchnorm -> relu -> avgpool 2 pad1 -> upsample 2 mode bilinear
  conv 4 k1 -> gap -> softmax
}
train { epochs 1  batch 4  optimizer adam lr 0.01  loss cross_entropy  metrics [accuracy] }
`)
	tr := trained(t, "tiny.pipe", src, 2)
	if _, err := onnx.Export(&bytes.Buffer{}, tr, onnx.WithOpset(16)); err == nil || !strings.Contains(err.Error(), "opset 16") {
		t.Errorf("opset 16: %v, want a refusal", err)
	}
	if _, err := onnx.Export(&bytes.Buffer{}, tr, onnx.WithOpset(22)); err == nil {
		t.Error("opset 22 was accepted")
	}
	ort := onnxtest.Runtime(t)
	x := randomInput(2, tr.Info.InputShape, 3)
	want := make([]float32, 2*numel(tr.Info.OutputShape))
	if err := tr.Predict(x, 2, want); err != nil {
		t.Fatal(err)
	}
	for _, opset := range []int{17, 18, 21} {
		var buf bytes.Buffer
		sum, err := onnx.Export(&buf, tr, onnx.WithOpset(opset))
		if err != nil {
			t.Fatal(err)
		}
		if sum.Opset != opset || len(sum.Folded) != 1 {
			t.Errorf("opset %d: summary %+v, want that opset and one folded batchnorm", opset, sum)
		}
		file := filepath.Join(t.TempDir(), "m.onnx")
		os.WriteFile(file, buf.Bytes(), 0o644)
		outs, _ := ort.Run(t, file, onnxtest.Batch{X: x, N: 2, Shape: tr.Info.InputShape})
		if d := onnxtest.MaxDiff(outs[0], want); !(d <= 1e-4) {
			t.Errorf("opset %d: differs by %.3g", opset, d)
		}
	}
}

// A layer with no ONNX form is refused with its name and the reason, and
// no bytes are written. Every op pipe's CPU engine runs exports, so the
// test gives a graph an op of its own.
func TestUnsupportedLayerIsNamed(t *testing.T) {
	src := []byte(`pipeline tiny
source blobs synthetic { samples 64  shape [1, 8, 8]  classes 3  seed 5 }
model small {
  input [1, 8, 8]
  conv 4 k3 -> relu -> flatten -> dense 3
}
train { epochs 1  batch 4  optimizer adam lr 0.01  loss cross_entropy  metrics [accuracy] }
`)
	tr := trained(t, "tiny.pipe", src, 2)
	var relu *stdlib.Node
	for _, n := range tr.Graph.Nodes {
		if n.Op == "relu" {
			relu = n
		}
	}
	relu.Op = "mish"
	var buf bytes.Buffer
	_, err := onnx.Export(&buf, tr)
	if !errors.Is(err, onnx.ErrUnsupported) || !strings.Contains(err.Error(), "layer relu (tiny.pipe:5)") || !strings.Contains(err.Error(), "no ONNX form for op mish") {
		t.Fatalf("an op without an ONNX form: %v, want ErrUnsupported naming the layer, its line and the op", err)
	}
	if buf.Len() != 0 {
		t.Errorf("%d bytes written for a refused model", buf.Len())
	}
}

// Layers no example uses, each through onnxruntime as the examples go:
// causal attention, mean_tokens, dense on tokens without a bias, relu
// random features, dilated and grouped convs, a depthwise conv, a
// standalone batchnorm (fusion off) on an image and on a vector,
// instancenorm without affine, groupnorm, leakyrelu, padded avgpool, convtranspose,
// bilinear upsampling, softmax over channels, pixelshuffle, tanh, sigmoid,
// silu (and swish), hardswish, se, drop_path.
func TestLayersMatchOnnxruntime(t *testing.T) {
	ort := onnxtest.Runtime(t)
	models := map[string]string{
		"tokens": `patches 2 dim 8 -> class_token -> pos_embed -> attention heads 2 causal true
  dense 8 bias false -> tanh -> dropout 0.2 -> mean_tokens -> dense 3`,
		"relu_features": `patches 2 dim 8 -> pos_embed -> layernorm -> random_attention heads 2 features 6 kernel relu
  select_token -> dense 3`,
		"causal_features": `patches 2 dim 8 -> pos_embed -> random_attention heads 2 features 6 causal true
  random_attention heads 4 features 5 kernel relu causal true -> mean_tokens -> dense 3`,
		"convs": `conv 8 k3 pad2 d2 groups 2 bias false -> batchnorm -> leakyrelu 0.1 -> conv 8 k3 pad1 groups 8
  instancenorm -> groupnorm 4 -> avgpool 3 s1 pad1 -> convtranspose 4 k2 s2 -> sigmoid -> upsample 2 mode bilinear
  conv 4 k1 -> softmax -> conv 8 k3 s2 pad1 -> pixelshuffle 2 -> maxpool 3 s2 pad1 -> gap -> batchnorm -> dense 3`,
		"swish": `conv 8 k3 pad1 -> silu -> conv 8 k3 pad1 groups 8 -> hardswish -> se squeeze 3 -> drop_path 0.3 -> conv 8 k1 -> batchnorm -> swish -> se -> gap -> dense 3`,
	}
	for name, body := range models {
		t.Run(name, func(t *testing.T) {
			src := []byte(`pipeline layers
source blobs synthetic { samples 64  shape [4, 8, 8]  classes 3  seed 5 }
model m {
  input [4, 8, 8]
  ` + body + `
}
train { epochs 1  batch 4  optimizer adam lr 0.01  loss cross_entropy  metrics [accuracy]  fuse false }
`)
			const n = 3
			tr := trained(t, "layers.pipe", src, n)
			x := randomInput(n, tr.Info.InputShape, 9)
			want := make([]float32, n*numel(tr.Info.OutputShape))
			if err := tr.Predict(x, n, want); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := onnx.Export(&buf, tr); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "m.onnx")
			if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			outs, _ := ort.Run(t, file, onnxtest.Batch{X: x, N: n, Shape: tr.Info.InputShape})
			if d := onnxtest.MaxDiff(outs[0], want); !(d <= onnxtest.Tolerance(want)) {
				t.Errorf("onnxruntime and pipe differ by up to %.3g", d)
			}
		})
	}
}
