package run_test

import (
	"context"
	"strings"
	"testing"

	"pipe/run"
)

// TestStepsPerEpoch cuts each epoch to the steps train's steps_per_epoch
// asks for: 19 batches an epoch become 5 steps, the schedule and the
// epoch count following.
func TestStepsPerEpoch(t *testing.T) {
	src := strings.Replace(blobs, "epochs 3 ", "epochs 3  steps_per_epoch 5 ", 1)
	j := newJob(t, src)
	epochs := 0
	res, ds := j.run(t, context.Background(), nil, run.Hooks{Epoch: func(run.EpochResult) { epochs++ }})
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if res.Status != run.StatusCompleted || res.StepsPerEpoch != 5 || len(res.StepLosses) != 15 || epochs != 3 {
		t.Fatalf("status %s, %d steps an epoch, %d losses, %d epochs; want 3 epochs of 5 steps", res.Status, res.StepsPerEpoch, len(res.StepLosses), epochs)
	}
}
