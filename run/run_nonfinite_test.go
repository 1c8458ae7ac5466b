package run_test

import (
	"bytes"
	"context"
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
	j := newJob(t, blobs)
	res, ds := j.run(t, context.Background(), &enginetest.Backend{NaNAt: 25}, run.Hooks{})
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
