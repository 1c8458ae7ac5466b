package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pipe/sweep"
)

// fashionMLP is examples/fashion_mlp.pipe reading the repository's data
// from wherever the test runs, with more after it; it skips the test
// without the data (make data).
func fashionMLP(t *testing.T, more string) (dir, file string) {
	t.Helper()
	data, err := filepath.Abs("../../data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, "fashion-mnist", "train-images-idx3-ubyte.gz")); err != nil {
		t.Skip("no Fashion-MNIST (make data)")
	}
	src, err := os.ReadFile("../../examples/fashion_mlp.pipe")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(src), `"data/`, `"`+data+`/`) + more
	dir = t.TempDir()
	file = filepath.Join(dir, "fashion_mlp.pipe")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// stepLosses reads a run report's step losses.
func stepLosses(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		StepLosses []float64 `json:"step_losses"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.StepLosses
}

// The sweep of the tests: 12 trials, 2 at a time, on fashion_mlp at 4
// epochs of 15 steps. Half the widths cannot fit (4M units: 72 GiB of
// parameters and Adam's state), so trials are skipped before launch; the
// learning rates span 1e-5 to 0.5, so some trials are far worse than
// others and ASHA (rungs at epochs 1 and 3, the top third goes on) stops
// them.
const testSweep = `
sweep {
  trials 12  parallel 2  metric accuracy  sampler random  early_stop asha rung 1 eta 3  seed 4
  loguniform "train.lr" 1e-5 0.5
  choice "model.mlp.dense[0].units" [64, 4000000]
}
`

var testSweepSets = []string{"--set", "train.epochs=4", "--set", "train.steps_per_epoch=15"}

// TestSweepSkipsStopsAndResumes runs the sweep above, interrupts it once
// three trials have finished (as Ctrl-C would), and runs it again: the
// second run launches only the trials left (the interrupted ones resumed
// from their checkpoints), a trial that does not fit is skipped with its
// plan's reason and never launched, and ASHA stops at least one trial.
// Then the best trial, trained again by pipe run with its overrides,
// gives the same step losses.
func TestSweepSkipsStopsAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a sweep")
	}
	t.Setenv("PIPE_TEST_MAIN", "1") // the trials' processes are this binary as pipe
	dir, file := fashionMLP(t, testSweep)
	out := filepath.Join(dir, "sweep")
	args := append([]string{"sweep", "--dir", out, "--threads", "2"}, append(testSweepSets, file)...)
	state := filepath.Join(out, "sweep.json")

	ctx, cancel := context.WithCancel(context.Background())
	old := sweepContext
	sweepContext = func(*app) (context.Context, func()) { return ctx, cancel }
	t.Cleanup(func() { sweepContext = old })
	go func() {
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			if s, err := sweep.Load(state); err == nil {
				n := 0
				for _, tr := range s.Runs {
					if tr.Finished() && tr.Status != sweep.Skipped {
						n++
					}
				}
				if n >= 3 {
					cancel()
				}
			}
		}
	}()
	code, _, stderr := runPipe(t, "", args...)
	cancel()
	if code != exitInterrupted {
		t.Fatalf("first run: exit %d, want %d\n%s", code, exitInterrupted, stderr)
	}
	first, err := sweep.Load(state)
	if err != nil {
		t.Fatal(err)
	}
	if first.Done {
		t.Fatalf("the interrupted sweep says it is done\n%s", stderr)
	}
	before := map[int]*sweep.Trial{}
	for _, tr := range first.Runs {
		before[tr.ID] = tr
	}

	sweepContext = old
	code, stdout, stderr2 := runPipe(t, "", args...)
	if code != exitOK {
		t.Fatalf("second run: exit %d\n%s", code, stderr2)
	}
	t.Logf("first run:\n%s\nsecond run:\n%s\n%s", stderr, stderr2, stdout)
	s, err := sweep.Load(state)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Done || len(s.Runs) != 12 {
		t.Fatalf("done %v, %d trials", s.Done, len(s.Runs))
	}
	status := map[string]int{}
	launchedAgain, left := 0, 0
	for _, tr := range s.Runs {
		status[tr.Status]++
		b := before[tr.ID]
		was := 0
		if b != nil {
			was = b.Launches
		}
		launchedAgain += tr.Launches - was
		if tr.Status != sweep.Skipped && (b == nil || !b.Finished()) {
			left++
		}
		if b != nil && b.Finished() && tr.Launches != b.Launches {
			t.Errorf("trial %d had finished (%s) and was launched again", tr.ID, b.Status)
		}
		if tr.Status == sweep.Skipped && (tr.Launches != 0 || !strings.Contains(tr.Reason, "does not fit")) {
			t.Errorf("skipped trial %d: %d launches, reason %q", tr.ID, tr.Launches, tr.Reason)
		}
		if tr.Status == sweep.Failed {
			t.Errorf("trial %d failed: %s", tr.ID, tr.Reason)
		}
	}
	if launchedAgain != left {
		t.Errorf("the second run launched %d trials; %d were left", launchedAgain, left)
	}
	if status[sweep.Skipped] == 0 || status[sweep.Stopped] == 0 || status[sweep.Done] == 0 {
		t.Errorf("statuses %v: want trials skipped, stopped early and done", status)
	}
	for _, name := range []string{"best.pipe", "sweep.png"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(stdout, "STATUS") || !strings.Contains(stdout, "skipped") {
		t.Errorf("table:\n%s", stdout)
	}

	// The best trial again, by pipe run with its overrides: the same
	// losses (same seed, one thread as each of the sweep's two had).
	best := s.BestTrial()
	if best == nil || best.Status != sweep.Done {
		t.Fatalf("best trial %+v", best)
	}
	again := filepath.Join(dir, "again")
	rargs := []string{"run", "--threads", "1", "--checkpoint-dir", again}
	rargs = append(rargs, testSweepSets...)
	for _, o := range s.Overrides(best) {
		rargs = append(rargs, "--set", o)
	}
	if code, _, stderr := runPipe(t, "", append(rargs, file)...); code != exitOK {
		t.Fatalf("pipe run of trial %d: exit %d\n%s", best.ID, code, stderr)
	}
	want := stepLosses(t, filepath.Join(best.Dir, "report.json"))
	got := stepLosses(t, filepath.Join(again, "report.json"))
	if len(want) != 60 || !slices.Equal(got, want) {
		t.Errorf("trial %d's step losses %v\nrun again: %v", best.ID, want, got)
	}
}

// TestRunsReproduce: two whole runs of fashion_mlp with the same seed
// and thread count give the same step losses, bit for bit.
func TestRunsReproduce(t *testing.T) {
	if testing.Short() {
		t.Skip("trains twice")
	}
	dir, file := fashionMLP(t, "")
	var losses [2][]float64
	for i := range 2 {
		d := filepath.Join(dir, "run", string(rune('a'+i)))
		args := []string{"run", "--threads", "2", "--checkpoint-dir", d, "--set", "train.epochs=2", "--set", "train.steps_per_epoch=20", "--set", "seed=11", file}
		if code, _, stderr := runPipe(t, "", args...); code != exitOK {
			t.Fatalf("run %d: exit %d\n%s", i, code, stderr)
		}
		losses[i] = stepLosses(t, filepath.Join(d, "report.json"))
	}
	if len(losses[0]) != 40 || !slices.Equal(losses[0], losses[1]) {
		t.Errorf("step losses differ:\n%v\n%v", losses[0], losses[1])
	}
}
