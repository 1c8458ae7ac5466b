package torch

import (
	"math"
	"testing"

	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/run"
)

// TestSketchedLayersAgree: Panther's sketched_conv and sketched_dense give
// the same outputs and the same gradients on both engines, from the same
// tensors (the torch engine starts from the native engine's, sketches
// included): outputs within 1e-4, and after one SGD step at lr 1 (each
// parameter moves by minus its gradient) every parameter within 1e-4.
func TestSketchedLayersAgree(t *testing.T) {
	py := testPython(t)
	src := "pipeline p\nsource s synthetic {\n  samples 30\n  shape [2, 6, 6]\n  classes 4\n  seed 1\n}\nmodel m {\n  input [2, 6, 6]\n  sketched_conv 3 k3 s2 pad1 terms 2 rank 2 -> tanh -> flatten\n" +
		"  sketched_dense 4 terms 2 rank 3\n}\ntrain {\n  epochs 1\n  batch 3\n  optimizer sgd lr 1\n  loss mse\n}\n"
	prog, p, g := loadSrc(t, "p.pipe", []byte(src))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads = 3, 1
	native, err := native.Backend{}.Build(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()
	tm := buildTorch(t, g, cfg, Backend{Python: py})
	b := randomBatch(g, "mse", 3, 5)
	yn, yt := make([]float32, 3*4), make([]float32, 3*4)
	if _, err := native.Eval(b, yn); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Eval(b, yt); err != nil {
		t.Fatal(err)
	}
	for i := range yn {
		if d := math.Abs(float64(yn[i] - yt[i])); d > 1e-4 {
			t.Errorf("output %d: native %g, torch %g", i, yn[i], yt[i])
		}
	}
	before := native.State()
	native.ZeroGrad()
	ln, err := native.TrainStep(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := native.Step(1); err != nil {
		t.Fatal(err)
	}
	if err := tm.QueueTrain(b, 1, true, true); err != nil {
		t.Fatal(err)
	}
	if err := tm.QueueStep(0, 1); err != nil {
		t.Fatal(err)
	}
	res, err := tm.Results(true)
	if err != nil || len(res) != 1 || len(res[0].Losses) != 1 {
		t.Fatalf("torch: %v %v", res, err)
	}
	if lt := res[0].Losses[0]; math.Abs(lt-ln) > 1e-4*math.Max(1, math.Abs(ln)) {
		t.Errorf("loss: native %.8g, torch %.8g", ln, lt)
	}
	after := map[string][]float32{}
	for _, tn := range tm.State().Tensors {
		after[tn.Name] = tn.Data
	}
	checked := 0
	for _, tn := range native.State().Tensors {
		var old []float32
		for _, o := range before.Tensors {
			if o.Name == tn.Name {
				old = o.Data
			}
		}
		tt := after[tn.Name]
		if old == nil || len(tt) != len(tn.Data) {
			t.Errorf("%s: missing on one engine", tn.Name)
			continue
		}
		for i := range tt {
			gn, gt := float64(old[i]-tn.Data[i]), float64(old[i]-tt[i])
			if math.Abs(gn-gt) > 1e-4*math.Max(1, math.Abs(gn)) {
				t.Errorf("%s[%d]: gradient native %g, torch %g", tn.Name, i, gn, gt)
				break
			}
		}
		checked++
	}
	if checked < 7 { // S1s, bias, U1s of the conv; S1s, S2s, U1s, U2s, bias of the dense
		t.Errorf("%d tensors compared", checked)
	}
}
