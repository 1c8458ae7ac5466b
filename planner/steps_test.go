package planner

import (
	"strings"
	"testing"
)

// TestStepsPerCommand: a small model's steps go to the torch worker
// several to a command, sized by the step time and bounded; a step that
// accumulates micro-batches, one as long as a command, and a step of the
// native engine (in pipe's process: no message to save) go alone. Each
// says why.
func TestStepsPerCommand(t *testing.T) {
	for _, c := range []struct {
		name, model, train, engine string
		lo, hi                     int64
	}{
		{"small mlp", "small", "batch 64", "torch", 2, maxStepsPerCommand},
		{"accumulating", "small", "batch 64 effective_batch 256", "torch", 1, 1},
		{"resnet", "resnet", "batch 64", "torch", 1, 1},
		{"native", "small", "batch 64", "native", 1, 1},
	} {
		src := program(c.model, "cpu", "fp32", c.train)
		if c.model == "small" {
			src = strings.Replace(program("mlp", "cpu", "fp32", c.train), models["mlp"], "input [784]\n  mlp hidden [256, 128] out 10", 1)
		}
		p, ds := planSrc(t, src, WithEngine(c.engine))
		if ds.HasErrors() || p == nil {
			t.Fatalf("%s:\n%v", c.name, ds)
		}
		if k := p.StepsPerCommand; k < c.lo || k > c.hi {
			t.Errorf("%s: %d steps per command, want %d to %d", c.name, k, c.lo, c.hi)
		}
		var why string
		for _, d := range p.Decisions {
			if d.What == "steps per command" {
				why = d.Reason
			}
		}
		if why == "" || (c.name == "accumulating" && !strings.Contains(why, "accumulates 4 micro-batches")) ||
			(c.name == "native" && !strings.Contains(why, "in pipe's process")) {
			t.Errorf("%s: the decision says %q", c.name, why)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
