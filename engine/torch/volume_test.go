package torch

import (
	"math"
	"testing"

	"pipe/engine"
	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/run"
)

// volumeTol bounds the engines' difference on a 3-D model: the largest
// difference of the outputs, and of each tensor's one-step change, as a
// fraction of that tensor's largest value.
const volumeTol = 1e-4

// TestVolumesAgree runs 3-D models on both engines from the same weights
// and batch: a small 3-D U-Net (Conv3d, BatchNorm3d, MaxPool3d,
// ConvTranspose3d, concat) and a chain with the other 3-D ops
// (trilinear and nearest Upsample, an overlapping padded MaxPool3d, a
// strided padded ConvTranspose3d, global pooling of a volume), and the
// losses per voxel (cross_entropy, bce, dice; mse after the pooling). One plain
// SGD step makes each parameter's change lr times its gradient, so the
// changes compare the gradients, and the running statistics the
// batchnorms' forward statistics; then the evaluation outputs are
// compared.
func TestVolumesAgree(t *testing.T) {
	py := testPython(t)
	cases := []struct{ name, model, loss string }{
		{"unet3d", "input [2, 8, 8, 8]\n  unet depth 2 width 4 out 3 dims 3", "cross_entropy"},
		{"ops3d", "input [2, 4, 6, 6]\n  conv3d 4 k3 pad1 -> batchnorm -> relu -> upsample3d 2 mode trilinear\n  maxpool3d 3 s2 pad1 -> convtranspose3d 3 k3 s2 pad1 -> upsample3d 2\n  conv3d 2 k1 -> sigmoid", "bce"},
		{"gap3d", "input [2, 4, 6, 6]\n  conv3d 4 k3 s2 -> relu -> gap -> dense 3", "mse"},
		{"dice3d", "input [2, 4, 6, 6]\n  conv3d 4 k3 pad1 -> batchnorm -> relu -> conv3d 2 k1", "dice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := "pipeline v\nsource train synthetic {\n  samples 8\n  shape [2, 8, 8, 8]\n}\nmodel m {\n  " + c.model +
				"\n}\ntrain {\n  epochs 1\n  batch 4\n  loss " + c.loss + "\n  optimizer sgd lr 0.5\n}\n"
			prog, p, g := loadSrc(t, c.name+".pipe", []byte(src))
			cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
			cfg.Batch, cfg.Threads = 4, 2
			native, err := native.Backend{}.Build(g, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer native.Close()
			tm := buildTorch(t, g, cfg, Backend{Python: py})
			before := native.State()
			if err := tm.SetState(before); err != nil {
				t.Fatal(err)
			}
			b := randomBatch(g, c.loss, cfg.Batch, 3)
			var losses [2]float64
			for i, m := range []engine.Model{native, tm} {
				m.ZeroGrad()
				if losses[i], err = m.TrainStep(b, 1); err != nil {
					t.Fatal(err)
				}
				if err := m.Step(0.5); err != nil {
					t.Fatal(err)
				}
			}
			if d := math.Abs(losses[1]-losses[0]) / math.Abs(losses[0]); d > volumeTol {
				t.Errorf("loss native %.8g, torch %.8g", losses[0], losses[1])
			}
			an, at := native.State(), tm.State()
			checked, worst := 0, 0.0
			for _, x := range before.Tensors {
				yn, yt := an.Lookup(x.Name), at.Lookup(x.Name)
				if yt == nil || len(yt.Data) != len(x.Data) {
					t.Fatalf("%s: the torch engine has no such tensor", x.Name)
				}
				var scale, diff float64
				for i := range x.Data {
					dn, dt := float64(yn.Data[i]-x.Data[i]), float64(yt.Data[i]-x.Data[i])
					scale = math.Max(scale, math.Abs(dn))
					diff = math.Max(diff, math.Abs(dn-dt))
				}
				if scale == 0 {
					continue
				}
				checked++
				worst = math.Max(worst, diff/scale)
				if diff > volumeTol*scale {
					t.Errorf("%s: the engines' changes differ by %.2e of the largest (> %.0e)", x.Name, diff/scale, volumeTol)
				}
			}
			if checked < 4 {
				t.Fatalf("only %d tensors changed", checked)
			}
			outN := make([]float32, b.N*int(numel64(g.OutShape())))
			outT := make([]float32, len(outN))
			if _, err := native.Eval(b, outN); err != nil {
				t.Fatal(err)
			}
			if _, err := tm.Eval(b, outT); err != nil {
				t.Fatal(err)
			}
			var scale, diff float64
			for i := range outN {
				scale = math.Max(scale, math.Abs(float64(outN[i])))
				diff = math.Max(diff, math.Abs(float64(outN[i]-outT[i])))
			}
			if diff > volumeTol*scale {
				t.Errorf("evaluation outputs differ by %.2e of the largest (> %.0e)", diff/scale, volumeTol)
			}
			t.Logf("%d tensors: worst change difference %.2e; outputs %.2e", checked, worst, diff/scale)
		})
	}
}
