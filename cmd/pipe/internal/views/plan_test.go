package views

import (
	"strings"
	"testing"

	"pipe/planner/plan"
)

// TestTimeShowsTheHostFloor: a plan whose engine states a host floor
// prints it in its Time section beside the roofline, with its source,
// and the step that takes both with its bound; even without a forecast
// (a GPU plan made on another machine).
func TestTimeShowsTheHostFloor(t *testing.T) {
	p := &plan.Plan{Device: plan.Device{Name: "a100-80gb"}, StepsPerCommand: 3, Engine: plan.Engine{Name: "torch"},
		StepTime: plan.StepTime{StepSeconds: 4.726e-3, RooflineSeconds: 5.792e-6, HostSeconds: 4.726e-3, HostStepSeconds: 1.994e-3,
			HostCommandSeconds: 8.197e-3, HostOverlaps: true, HostSource: "make gpu-smoke on an H100", Bound: "host"}}
	var b strings.Builder
	forecast(&b, p)
	out := b.String()
	for _, want := range []string{"roofline      6 µs a step", "host floor    4.7 ms a step at 3 steps a command (2.0 ms a step, 8.2 ms a command; make gpu-smoke on an H100)",
		"plan's step   4.7 ms, host-bound (the longer of it and the roofline"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	b.Reset()
	p.StepTime = plan.StepTime{StepSeconds: 2e-3, Bound: "compute"}
	forecast(&b, p)
	if b.Len() != 0 {
		t.Errorf("a plan without a floor or a forecast printed a Time section:\n%s", b.String())
	}
}
