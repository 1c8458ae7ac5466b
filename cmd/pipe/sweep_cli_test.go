package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"pipe/sweep"
)

// tinySweepPipe is a pipeline whose trials train in a fraction of a
// second: 2 epochs of 4 steps on synthetic data, validated on a second
// synthetic source; the sweep block (and anything else) is appended.
const tinySweepPipe = `pipeline tiny
seed 3
source blobs synthetic { samples 256  shape [12]  classes 4  seed 5 }
source held synthetic { samples 64  shape [12]  classes 4  seed 6 }
model net {
  input [12]
  dense 16 -> relu -> dense 4
}
train { epochs 2  batch 16  optimizer adam lr 0.01  loss cross_entropy  metrics [accuracy]  steps_per_epoch 4  source blobs }
evaluate { source held }
`

// tinySweep writes tinySweepPipe with more after it and returns its
// folder and path; trials run this test binary as pipe.
func tinySweep(t *testing.T, more string) (dir, file string) {
	t.Helper()
	t.Setenv("PIPE_TEST_MAIN", "1")
	dir = t.TempDir()
	file = filepath.Join(dir, "tiny.pipe")
	if err := os.WriteFile(file, []byte(tinySweepPipe+more), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// TestSweepOneLogPoint: the sweep of issue 34 (one trial of a
// loguniform learning rate) panicked drawing its plot; it writes
// best.pipe and sweep.png and says so.
func TestSweepOneLogPoint(t *testing.T) {
	dir, file := tinySweep(t, `sweep { trials 1 parallel 1 metric accuracy max sampler random loguniform "train.lr" 1e-4 1e-1 }`+"\n")
	out := filepath.Join(dir, "sweep")
	code, stdout, stderr := runPipe(t, "", "sweep", "--dir", out, "--threads", "1", file)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, name := range []string{"best.pipe", "sweep.png"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(stderr, "holds sweep.json, best.pipe (trial 1), sweep.png") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// TestSweepNothingCompleted: when every trial fails there is no best
// trial: the sweep writes no best.pipe or sweep.png, says so rather
// than naming them, and exits 1.
func TestSweepNothingCompleted(t *testing.T) {
	// mae on a classifier passes pipe check (train's metrics are checked
	// against the data when it is read) and fails every trial's run.
	dir, file := tinySweep(t, `sweep { trials 2 parallel 1 metric mae sampler random loguniform "train.lr" 1e-4 1e-1 }`+"\n")
	src, _ := os.ReadFile(file)
	if err := os.WriteFile(file, []byte(strings.Replace(string(src), "metrics [accuracy]", "metrics [mae]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "sweep")
	code, stdout, stderr := runPipe(t, "", "sweep", "--dir", out, "--threads", "1", file)
	if code != exitErrors {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitErrors, stdout, stderr)
	}
	for _, name := range []string{"best.pipe", "sweep.png"} {
		if _, err := os.Stat(filepath.Join(out, name)); !os.IsNotExist(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !strings.Contains(stderr, "holds sweep.json; no best.pipe") || !strings.Contains(stderr, "no trial completed") {
		t.Errorf("stderr:\n%s", stderr)
	}
	st, err := sweep.Load(filepath.Join(out, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range st.Runs {
		if tr.Status != sweep.Failed || !strings.Contains(tr.Reason, "mae measures numeric errors") {
			t.Errorf("trial %d: %s %q", tr.ID, tr.Status, tr.Reason)
		}
	}
}

// unfinishedTinySweep makes an unfinished sweep of the file under
// out/tiny/sweeps of the current folder (interrupted before its first
// trial) and returns its folder.
func unfinishedTinySweep(t *testing.T, file string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	old := sweepContext
	sweepContext = func(*app) (context.Context, func()) { return ctx, cancel }
	defer func() { sweepContext = old }()
	if code, _, stderr := runPipe(t, "", "sweep", "--threads", "1", file); code != exitInterrupted {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	names, _ := filepath.Glob(filepath.Join("out", "tiny", "sweeps", "*", "sweep.json"))
	if len(names) != 1 {
		t.Fatalf("sweeps %v", names)
	}
	return filepath.Dir(names[0])
}

const twoTrials = `sweep { trials 2 parallel 1 metric accuracy sampler random seed 1 loguniform "train.lr" 1e-3 1e-1 }` + "\n"

// sweepDone checks that the sweep in dir finished every trial.
func sweepDone(t *testing.T, dir string) {
	t.Helper()
	st, err := sweep.Load(filepath.Join(dir, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Done {
		t.Errorf("%s: not done", dir)
	}
	for _, tr := range st.Runs {
		if tr.Status != sweep.Done {
			t.Errorf("%s: trial %d %s: %s", dir, tr.ID, tr.Status, tr.Reason)
		}
	}
}

// TestSweepFolderInUse: a sweep's folder is locked while pipe sweep runs
// it. Another pipe sweep of the file passes over it, saying whose it
// is, and starts a sweep of its own; --dir naming it is refused, naming
// the holder; once free, pipe sweep continues it.
func TestSweepFolderInUse(t *testing.T) {
	dir, file := tinySweep(t, twoTrials)
	t.Chdir(dir)
	held := unfinishedTinySweep(t, file)
	lock, err := sweep.TryLock(held, file) // as the pipe sweep running it would
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("pid %d, host %s", os.Getpid(), host)

	code, _, stderr := runPipe(t, "", "sweep", "--threads", "1", file)
	if code != exitOK || !strings.Contains(stderr, "another pipe sweep runs "+held+" ("+holder) || !strings.Contains(stderr, "starting a new sweep") {
		t.Fatalf("beside a running sweep: exit %d\n%s", code, stderr)
	}
	names, _ := filepath.Glob(filepath.Join("out", "tiny", "sweeps", "*", "sweep.json"))
	if len(names) != 2 {
		t.Fatalf("sweeps %v", names)
	}
	for _, n := range names {
		if d := filepath.Dir(n); d != held {
			sweepDone(t, d)
		}
	}

	code, _, stderr = runPipe(t, "", "sweep", "--dir", held, file)
	if code != exitErrors || !strings.Contains(stderr, "another pipe sweep runs it ("+holder) {
		t.Fatalf("--dir of a running sweep: exit %d\n%s", code, stderr)
	}

	lock.Release()
	code, _, stderr = runPipe(t, "", "sweep", "--threads", "1", file)
	if code != exitOK || !strings.Contains(stderr, "tiny.pipe in "+held) {
		t.Fatalf("once free: exit %d\n%s", code, stderr)
	}
	sweepDone(t, held)
}

// TestTwoSweepsAtOnce: two pipe sweep of one file started together, with
// an unfinished sweep of it to continue: one continues it, the other
// gets a folder of its own, and no trial of either fails on the other's
// locks (they did, and sweep.json was the last writer's).
func TestTwoSweepsAtOnce(t *testing.T) {
	dir, file := tinySweep(t, twoTrials)
	t.Chdir(dir)
	held := unfinishedTinySweep(t, file)
	var wg sync.WaitGroup
	codes, errs := make([]int, 2), make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, errs[i] = runPipe(t, "", "sweep", "--threads", "1", file)
		}()
	}
	wg.Wait()
	for i := range 2 {
		if codes[i] != exitOK {
			t.Errorf("sweep %d: exit %d\n%s", i, codes[i], errs[i])
		}
	}
	if n := strings.Count(errs[0]+errs[1], "tiny.pipe in "+held+":"); n != 1 {
		t.Errorf("%d sweeps continued %s\n%s\n%s", n, held, errs[0], errs[1])
	}
	names, _ := filepath.Glob(filepath.Join("out", "tiny", "sweeps", "*", "sweep.json"))
	if len(names) != 2 {
		t.Fatalf("sweeps %v", names)
	}
	for _, n := range names {
		sweepDone(t, filepath.Dir(n))
	}
}
