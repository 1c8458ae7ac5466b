package planner

import (
	"slices"
	"strings"
	"testing"

	"pipe/planner/cost"
)

const int8File = `pipeline q
source imgs synthetic { samples 256  shape [1, 16, 16]  classes 4 }
model m {
  input [1, 16, 16]
  conv 8 k3 pad1 -> batchnorm -> relu
  conv 16 k3 pad1 -> relu -> maxpool 2
  flatten -> dense 4
}
train { epochs 1  batch 16  optimizer adam lr 1e-3  loss cross_entropy }
predict { source imgs  write "p.csv"  precision int8  calibrate 3 }
`

// TestInferenceInt8: int8 names the layers stdlib.Int8 quantises and
// their weight bytes (int8 weights, a scale and a bias per channel); on
// the torch engine the plan says fp32, warns, and why.
func TestInferenceInt8(t *testing.T) {
	prog := check(t, "q.pipe", []byte(int8File))
	p, ds := Plan(prog, testCosts, WithHost(testHost), WithDevice("cpu"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	inf := p.Inference
	if inf == nil || inf.Precision != "int8" || inf.CalibrateBatches != 3 {
		t.Fatalf("inference %+v, want int8 calibrated on 3 batches", inf)
	}
	// conv1's K is 1·3·3 = 9: fp32. conv2 (K 72) and the dense run in int8.
	if want := []string{"conv2", "dense1"}; !slices.Equal(inf.Int8Layers, want) {
		t.Fatalf("int8 layers %v, want %v", inf.Int8Layers, want)
	}
	conv2, dense := int64(16*72), int64(4*16*8*8)
	if want := conv2 + 8*16 + dense + 8*4; inf.WeightsInt8 != want {
		t.Errorf("int8 weights %d bytes, want %d", inf.WeightsInt8, want)
	}
	if want := 4 * (conv2 + 16 + dense + 4); inf.WeightsFP32 != want {
		t.Errorf("fp32 weights %d bytes, want %d", inf.WeightsFP32, want)
	}
	d := decision(p, "inference precision")
	if d == nil || d.Value != "int8" || !strings.Contains(d.Reason, "conv1 (K = 9") {
		t.Fatalf("decision %+v: want int8 and conv1's reason", d)
	}

	p, ds = Plan(prog, testCosts, WithHost(testHost), WithDevice("a100-80gb"))
	if p.Inference == nil || p.Inference.Precision != "fp32" {
		t.Fatalf("on the torch engine: %+v, want fp32", p.Inference)
	}
	warned := false
	for _, x := range ds {
		warned = warned || x.Code == "int8-engine"
	}
	if !warned {
		t.Fatalf("no int8-engine warning: %v", ds)
	}
}

// TestInferenceInt8Kernel: the decision names the host's int8 kernel and
// its measured speed, and int8 slower than fp32 there is a warning; an
// unknown kernel adds nothing (the golden plans' hosts).
func TestInferenceInt8Kernel(t *testing.T) {
	prog := check(t, "q.pipe", []byte(int8File))
	for _, c := range []struct {
		k    cost.Int8Kernel
		warn bool
	}{
		{cost.Int8Kernel{}, false},
		{cost.Int8Kernel{Name: "AVX-512 VNNI", Speedup: 1.4, Measured: "a bench"}, false},
		{cost.Int8Kernel{Name: "Go", Speedup: 0.1, Measured: "a bench"}, true},
	} {
		h := testHost.WithEngineHost("native", cost.Host{Int8: c.k})
		p, ds := Plan(prog, testCosts, WithHost(h), WithDevice("cpu"))
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		d := decision(p, "inference precision")
		if d == nil || d.Value != "int8" {
			t.Fatalf("kernel %q: decision %+v, want int8 as written", c.k.Name, d)
		}
		if named := strings.Contains(d.Reason, "int8 kernel"); named != (c.k.Name != "") || !strings.Contains(d.Reason, c.k.Name) {
			t.Errorf("kernel %q: the reason %q names the kernel: %v", c.k.Name, d.Reason, named)
		}
		warned := false
		for _, x := range ds {
			warned = warned || x.Code == "int8-slow"
		}
		if warned != c.warn {
			t.Errorf("kernel %q (%.2f× fp32): int8-slow warning %v, want %v: %v", c.k.Name, c.k.Speedup, warned, c.warn, ds)
		}
	}
}
