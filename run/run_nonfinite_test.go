package run_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"pipe/engine/enginetest"
	"pipe/run"
	"pipe/run/report"
)

// The summary and the detail of a non-finite loss number the failing step
// the same way progress does (from 1), and the result counts the steps
// trained before it.
func TestNonFiniteStepNumbersAgree(t *testing.T) {
	for _, unit := range []int64{1, 8} {
		for _, ahead := range []bool{false, true} {
			name := map[bool]string{false: "waited", true: "queued ahead"}[ahead] + fmt.Sprintf(", %d steps a command", unit)
			t.Run(name, func(t *testing.T) {
				nonFiniteStepNumbersAgree(t, &enginetest.Backend{NaNAt: 25, Ahead: ahead}, unit)
			})
		}
	}
}

// nonFiniteStepNumbersAgree runs blobs on be, whose 25th micro-batch is
// NaN, unit steps a command. An engine that queues ahead (Backend.Ahead)
// has step 26 queued when the NaN comes back: it was not trained, and
// not counted; nor are the steps after the NaN in its command.
func nonFiniteStepNumbersAgree(t *testing.T, be *enginetest.Backend, unit int64) {
	j := newJob(t, blobs)
	j.plan.StepsPerCommand = unit
	res, ds := j.run(t, context.Background(), be, run.Hooks{})
	d := findDiag(t, ds, run.CodeNonFinite)
	if !strings.Contains(d.Summary, "at step 25") || !strings.Contains(d.Detail, "at step 25 (micro-batch 25)") {
		t.Errorf("diagnostic: %s: %s", d.Summary, d.Detail)
	}
	if res.Position.Step != 24 {
		t.Errorf("Position.Step %d, want the 24 steps trained before the NaN", res.Position.Step)
	}
	var b bytes.Buffer
	report.Summary(&b, res, "", "")
	if !strings.Contains(b.String(), "stopped by a non-finite loss after 24 steps (1/3 epochs)") {
		t.Errorf("summary:\n%s", b.String())
	}
}
