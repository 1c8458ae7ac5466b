package main

import (
	"bytes"
	"strings"
	"testing"

	"pipe/planner/plan"
)

// TestMemoryErrors: the peak phase's reserved estimate is held against
// max_memory_reserved and the total against the device's used memory.
func TestMemoryErrors(t *testing.T) {
	m := plan.Memory{Total: 1500, PeakPhase: plan.PhaseBackward, Phases: []plan.MemoryPhase{
		{Name: plan.PhaseForward, Allocated: 700, Reserved: 800, Device: 1300},
		{Name: plan.PhaseBackward, Allocated: 900, Reserved: 1000, Device: 1500}}}
	rsv, alloc, ph := estimates(m)
	if rsv != 1000 || alloc != 900 || ph != plan.PhaseBackward {
		t.Fatalf("estimates: %d %d %s", rsv, alloc, ph)
	}
	r := Result{Example: "x", EstimatedBytes: 1500, EstimatedReservedBytes: rsv, EstimatedAllocatedBytes: alloc, PeakPhase: ph,
		MaxReservedBytes: 800, DeviceUsedBytes: 2000, ErrorReservedPercent: errorPercent(rsv, 800), ErrorUsedPercent: errorPercent(1500, 2000)}
	var b bytes.Buffer
	printMemory(&b, []Result{r})
	if out := b.String(); !strings.Contains(out, "+25.0%") || !strings.Contains(out, "-25.0%") {
		t.Errorf("the errors are not printed:\n%s", out)
	}
	if errorPercent(1, 0) != nil {
		t.Error("an error against nothing measured")
	}
}
