package report

import (
	"bytes"
	"strings"
	"testing"

	"pipe/exec"
)

// One step and one sample are not "1 steps" and "1 samples".
func TestSummaryCountsInTheSingular(t *testing.T) {
	var b bytes.Buffer
	Summary(&b, &exec.Result{Pipeline: "p", Status: exec.StatusMaxSteps, EpochsPlanned: 2, Position: exec.Position{Step: 1},
		Final: &exec.Evaluation{Source: "s", Part: "validation split", Samples: 1}}, "", "")
	got := b.String()
	for _, want := range []string{"p: stopped at the step limit after 1 step (0/2 epochs)", "s (validation split, 1 sample): loss"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
}
