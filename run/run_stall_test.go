package run_test

import (
	"context"
	"testing"
	"time"

	"pipe/dataset"
	"pipe/engine/enginetest"
	"pipe/run"
)

// slowSource delays every Read, as a slow disk does.
type slowSource struct {
	dataset.Dataset
	delay time.Duration
}

func (s slowSource) Read(i int, x, y, m []float32) error {
	time.Sleep(s.delay)
	return s.Dataset.Read(i, x, y, m)
}

// TestLoaderStall: a source slower than the model leaves the step waiting
// for its batches most of the epoch, a fast one hardly at all, and the
// epoch's result says which. The model's step takes 2 ms; the slow
// source's batch of 16 takes 16 × 1 ms over the loader's workers.
func TestLoaderStall(t *testing.T) {
	stall := func(delay time.Duration) (stall, total float64) {
		j := newJob(t, blobs)
		be := &enginetest.Backend{StepDelay: 2 * time.Millisecond}
		wrap := run.WithTrainWrap(func(d dataset.Dataset) dataset.Dataset {
			if delay == 0 {
				return d
			}
			return slowSource{d, delay}
		})
		res, ds := j.run(t, context.Background(), be, run.Hooks{}, wrap)
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		for _, e := range res.EpochResults {
			if e.LoaderStallSeconds < 0 || e.LoaderStallSeconds > e.Seconds {
				t.Fatalf("epoch %d: stall %v s of %v s", e.Epoch, e.LoaderStallSeconds, e.Seconds)
			}
			stall += e.LoaderStallSeconds
			total += e.Seconds
		}
		return stall, total
	}
	slow, slowTotal := stall(time.Millisecond)
	fast, fastTotal := stall(0)
	t.Logf("slow source: stall %.3f s of %.3f s; fast source: %.3f s of %.3f s", slow, slowTotal, fast, fastTotal)
	if !(slow > fast) || !(slow/slowTotal > fast/fastTotal) {
		t.Errorf("the slow source stalled %.3f s of %.3f s, the fast one %.3f s of %.3f s: want the slow one's stall and share larger", slow, slowTotal, fast, fastTotal)
	}
	if slow < slowTotal/2 {
		t.Errorf("the slow source stalled %.3f s of %.3f s: the data is the bottleneck, so most of the epoch should be waiting", slow, slowTotal)
	}
	if fast > fastTotal/2 {
		t.Errorf("the fast source stalled %.3f s of %.3f s: the model is the bottleneck, so most of the epoch should be stepping", fast, fastTotal)
	}
}
