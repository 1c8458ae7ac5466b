package run_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/engine/enginetest"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/report"
)

// TestReportComparesLikeWithLike: on a GPU the plan's reserved memory at
// its peak phase is held to max_memory_reserved (neither has the CUDA
// context), and its total, which has it, to the device's used memory;
// the fake engine reports the device's figures as the torch engine's
// workers do.
func TestReportComparesLikeWithLike(t *testing.T) {
	j := newJob(t, blobs)
	j.plan.Memory.Total = 1800 << 20
	j.plan.Memory.PeakPhase = plan.PhaseBackward
	j.plan.Memory.Phases = []plan.MemoryPhase{{Name: plan.PhaseForward, Allocated: 400 << 20, Reserved: 500 << 20, Device: 1400 << 20},
		{Name: plan.PhaseBackward, Allocated: 800 << 20, Reserved: 900 << 20, Device: 1800 << 20}}
	be := &enginetest.Backend{Devices: []engine.DeviceMemory{{Device: "cuda:0", MaxAllocated: 850 << 20, MaxReserved: 1000 << 20, Used: 1600 << 20, Total: 80 << 30}}}
	res := mustRun(t, j, be, run.WithMaxSteps(2))
	if res.Memory.EstimatedReserved != 900<<20 || res.Memory.Measured != 1000<<20 || res.Memory.HeldTo() != 900<<20 {
		t.Errorf("the run holds %d (reserved %d) to %d (%s)", res.Memory.HeldTo(), res.Memory.EstimatedReserved, res.Memory.Measured, res.Memory.MeasuredBy)
	}
	r := report.New(res, j.plan)
	near := func(p *float64, want float64) bool { return p != nil && math.Abs(*p-want) < 1e-9 }
	if !near(r.EstimateErrorPercent, -10) || r.EstimatedReservedBytes != 900<<20 || r.EstimatedPeakBytes != 1800<<20 {
		t.Errorf("the report's estimate error %v (reserved %d, total %d), want -10%%: 900 MiB planned against 1000 MiB reserved",
			r.EstimateErrorPercent, r.EstimatedReservedBytes, r.EstimatedPeakBytes)
	}
	if d := r.Devices; len(d) != 1 || !near(d[0].ErrorPercent, -10) || !near(d[0].UsedErrorPercent, 12.5) {
		t.Errorf("devices %+v: want the reserved error -10%% and the used memory's +12.5%% (1800 MiB planned, 1600 MiB in use)", d)
	}
	var b bytes.Buffer
	report.Summary(&b, res, "", "")
	for _, want := range []string{"900.0 MiB reserved planned: the plan is 10.0% short",
		"the device has 1.6 GiB of 80.0 GiB in use, 1.8 GiB planned with the CUDA context: the plan is 12.5% over"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the summary has no %q:\n%s", want, b.String())
		}
	}
}
