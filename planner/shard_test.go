package planner

import (
	"strings"
	"testing"
)

// TestNoFitOnManyDevices: a model of 64 layers of 16384 × 16384 (288 GiB
// of parameters, gradients and Adam's state) fits no A100 at batch 1.
// On 32 of them the plan says why more devices do not help, that
// sharding would fit and that pipe does not shard yet, not to use a
// device with more memory; on one it names the devices sharding needs.
func TestNoFitOnManyDevices(t *testing.T) {
	src := "pipeline big\nsource s synthetic { samples 640  shape [16384]  classes 4  seed 5 }\nmodel net {\n  input [16384]\n  " +
		strings.Repeat("dense 16384 -> ", 64) + "dense 4\n}\ntrain { epochs 1  batch 8  optimizer adam lr 0.01  loss cross_entropy }\n"
	detail := func(opts ...Option) string {
		_, ds := planSrc(t, src, append([]Option{WithDevice("a100-80gb"), WithEngine("torch")}, opts...)...)
		for _, d := range ds {
			if d.Code == CodeNoFit {
				return d.Detail
			}
		}
		t.Fatalf("no %s: %v", CodeNoFit, ds)
		return ""
	}
	many := detail(WithDevices(8, 4))
	for _, want := range []string{"More devices do not help", "on each of the 32 devices", "would split them over the 32 devices", "which fits", "pipe does not shard yet"} {
		if !strings.Contains(many, want) {
			t.Errorf("32 devices: no %q in %s", want, many)
		}
	}
	if strings.Contains(many, "a device with more memory") {
		t.Errorf("32 devices: %s", many)
	}
	if one := detail(); !strings.Contains(one, "a device with more memory") || !strings.Contains(one, "fit on 5 of them") {
		t.Errorf("one device: %s", one)
	}
}
