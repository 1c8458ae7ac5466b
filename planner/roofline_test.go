package planner

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayerRooflineSumsToStepTime checks that the layers' roofline
// estimates are StepTime's, split: their forward and backward seconds sum
// to the micro-batch's, the backward is two forwards (three when
// recomputed), and only the input goes without one.
func TestLayerRooflineSumsToStepTime(t *testing.T) {
	for _, path := range examples(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		prog, src := load(t, path, "examples/"+name+".pipe")
		for _, dev := range goldenDevices {
			p, ds := Plan(prog, testCosts, WithHost(testHost), WithDevice(dev), WithSource(src))
			if ds.HasErrors() || p == nil {
				t.Fatalf("%s on %s: %v", name, dev, ds)
			}
			var sum float64
			for _, l := range p.Layers {
				r := l.Roofline
				if l.Op == "input" {
					if r != nil {
						t.Errorf("%s on %s: the input has a roofline", name, dev)
					}
					continue
				}
				if r == nil {
					t.Fatalf("%s on %s: %s has no roofline", name, dev, l.Name)
				}
				passes := 2.0
				if l.Recomputed {
					passes = 3
				}
				if math.Abs(r.BackwardSeconds-passes*r.ForwardSeconds) > 1e-3*r.BackwardSeconds {
					t.Errorf("%s on %s: %s backward %g, forward %g", name, dev, l.Name, r.BackwardSeconds, r.ForwardSeconds)
				}
				if want := float64(l.FLOPs * p.BatchSize); math.Abs(r.ForwardFLOPs-want) > 1e-3*want {
					t.Errorf("%s on %s: %s forward FLOPs %g, want %g", name, dev, l.Name, r.ForwardFLOPs, want)
				}
				sum += r.ForwardSeconds + r.BackwardSeconds
			}
			if mb := p.StepTime.MicroBatchSeconds; math.Abs(sum-mb) > 1e-3*mb {
				t.Errorf("%s on %s: the layers sum to %g s, the micro-batch is %g s", name, dev, sum, mb)
			}
		}
	}
}
