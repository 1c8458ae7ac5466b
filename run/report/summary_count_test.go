package report

import (
	"bytes"
	"strings"
	"testing"

	"pipe/run"
)

// One step and one sample are not "1 steps" and "1 samples".
func TestSummaryCountsInTheSingular(t *testing.T) {
	var b bytes.Buffer
	Summary(&b, &run.Result{Pipeline: "p", Status: run.StatusMaxSteps, EpochsPlanned: 2, Position: run.Position{Step: 1},
		Final: &run.Evaluation{Source: "s", Part: "validation split", Samples: 1}}, "", "")
	got := b.String()
	for _, want := range []string{"p: stopped at the step limit after 1 step (0/2 epochs)", "s (validation split, 1 sample): loss"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
}
