package main

import (
	"os"
	"path/filepath"
	"strings"
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
