package run_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/engine/enginetest"
	"pipe/run"
	"pipe/run/folder"
)

// runPlaced runs the job as pipe run does without --checkpoint-dir: Run
// places it under dir/out/PIPELINE itself.
func (j *job) runPlaced(t *testing.T, opts ...run.Option) (*run.Result, diag.Diagnostics) {
	t.Helper()
	all := append([]run.Option{run.WithBackend(&enginetest.Backend{}), run.WithBase(j.dir)}, opts...)
	return run.Run(context.Background(), j.plan, j.prog, run.Hooks{}, all...)
}

func mustPlaced(t *testing.T, j *job, opts ...run.Option) *run.Result {
	t.Helper()
	res, ds := j.runPlaced(t, opts...)
	if ds.HasErrors() {
		t.Fatalf("run failed:\n%v", ds)
	}
	return res
}

func latestOf(t *testing.T, j *job) string {
	t.Helper()
	dir, legacy, err := folder.LatestRun(filepath.Join(j.dir, "out", "tiny"))
	if err != nil || legacy {
		t.Fatalf("latest: %v (legacy %v)", err, legacy)
	}
	return dir
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEveryRunHasItsOwnFolder: a run given no folder writes under
// out/PIPELINE/runs in one of its own, and latest names the newest; a
// short run after a finished one leaves the finished one's files as they
// were, best.ckpt included, and has no best.ckpt of its own until it
// writes one.
func TestEveryRunHasItsOwnFolder(t *testing.T) {
	j := newJob(t, blobs)
	first := mustPlaced(t, j)
	a := first.CheckpointDir
	if filepath.Dir(a) != filepath.Join(j.dir, "out", "tiny", "runs") || latestOf(t, j) != a {
		t.Fatalf("the first run wrote to %s; latest is %s", a, latestOf(t, j))
	}
	lastA, bestA := readBytes(t, filepath.Join(a, folder.LastCheckpoint)), readBytes(t, filepath.Join(a, folder.BestCheckpoint))
	second := mustPlaced(t, j, run.WithMaxSteps(5))
	b := second.CheckpointDir
	if b == a || filepath.Dir(b) != filepath.Dir(a) || latestOf(t, j) != b {
		t.Fatalf("the second run wrote to %s (the first to %s); latest is %s", b, a, latestOf(t, j))
	}
	if !bytes.Equal(readBytes(t, filepath.Join(a, folder.LastCheckpoint)), lastA) || !bytes.Equal(readBytes(t, filepath.Join(a, folder.BestCheckpoint)), bestA) {
		t.Error("the second run changed the first run's checkpoints")
	}
	if _, err := os.Stat(filepath.Join(b, folder.BestCheckpoint)); err == nil {
		t.Error("a run of 5 steps, which validated no epoch, has a best.ckpt")
	}
	if st, err := os.Lstat(filepath.Join(j.dir, "out", "tiny", folder.LatestName)); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("latest is not a symbolic link: %v", err)
	}
}

// TestResumeContinuesTheLatestRun: --resume without a path continues the
// latest run in its own folder, keeping its best.ckpt; an earlier run is
// left alone. With no run at all it says so.
func TestResumeContinuesTheLatestRun(t *testing.T) {
	j := newJob(t, blobs)
	if _, ds := j.runPlaced(t, run.WithResume("")); !strings.Contains(findDiag(t, ds, run.CodeResume).Summary, "no run to resume") {
		t.Errorf("nothing to resume: %v", ds)
	}
	a := mustPlaced(t, j, run.WithMaxSteps(3)).CheckpointDir
	b := mustPlaced(t, j, run.WithMaxSteps(21)).CheckpointDir // an epoch is 19 steps: b has a best.ckpt
	lastA := readBytes(t, filepath.Join(a, folder.LastCheckpoint))
	bestB := readBytes(t, filepath.Join(b, folder.BestCheckpoint))
	res := mustPlaced(t, j, run.WithMaxSteps(25), run.WithResume(""))
	if res.ResumedFrom == nil || res.ResumedFrom.Step != 21 || res.CheckpointDir != b || res.Position.Step != 25 {
		t.Fatalf("resumed from %+v into %s (latest run %s), at step %d", res.ResumedFrom, res.CheckpointDir, b, res.Position.Step)
	}
	if !bytes.Equal(readBytes(t, filepath.Join(b, folder.BestCheckpoint)), bestB) {
		t.Error("resumed in its own folder, the run lost its best.ckpt")
	}
	if !bytes.Equal(readBytes(t, filepath.Join(a, folder.LastCheckpoint)), lastA) {
		t.Error("resuming the latest run changed an earlier one")
	}
}

// TestAFreshRunInAUsedFolderReplacesItAll: a fresh run in a folder given
// explicitly replaces the earlier run's best.ckpt and epoch files with
// its last.ckpt, so best and last are never two runs'.
func TestAFreshRunInAUsedFolderReplacesItAll(t *testing.T) {
	j := newJob(t, strings.Replace(blobs, "loss cross_entropy", "loss cross_entropy  save all", 1))
	dir := filepath.Join(j.dir, "ckpt")
	mustRun(t, j, nil)
	for _, f := range []string{folder.BestCheckpoint, "epoch-003.ckpt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("the full run left no %s: %v", f, err)
		}
	}
	mustRun(t, j, nil, run.WithMaxSteps(5))
	files, _ := filepath.Glob(filepath.Join(dir, "*.ckpt"))
	if len(files) != 1 || filepath.Base(files[0]) != folder.LastCheckpoint {
		t.Errorf("after a fresh run of 5 steps the folder holds %v, want its last.ckpt alone", files)
	}
}

// TestAFreshRunRefusesAnotherPipelinesFolder: a run that would write
// into a folder holding another pipeline's checkpoints is refused before
// it trains, and the checkpoints are left as they were. Which
// checkpoints are another's: folder's TestClaim.
func TestAFreshRunRefusesAnotherPipelinesFolder(t *testing.T) {
	a := newJob(t, blobs)
	shared := run.WithCheckpointDir(filepath.Join(a.dir, "shared"))
	mustRun(t, a, nil, run.WithMaxSteps(3), shared)
	last := filepath.Join(a.dir, "shared", folder.LastCheckpoint)
	before := readBytes(t, last)
	b := newJob(t, strings.Replace(blobs, "pipeline tiny", "pipeline other", 1))
	res, ds := b.run(t, context.Background(), nil, run.Hooks{}, shared)
	d := findDiag(t, ds, run.CodeOtherFolder)
	if !strings.Contains(d.Detail, last) || res.SamplesTrained != 0 {
		t.Errorf("trained %d samples: %s", res.SamplesTrained, d.Detail)
	}
	if !bytes.Equal(readBytes(t, last), before) {
		t.Error("the refused runs changed the folder's checkpoint")
	}
}

// TestTheOldLayoutStillResumes: a pipeline trained before run folders
// (out/PIPELINE/checkpoints, no latest) resumes there with --resume.
func TestTheOldLayoutStillResumes(t *testing.T) {
	j := newJob(t, blobs)
	old := filepath.Join(j.dir, "out", "tiny", "checkpoints")
	mustRun(t, j, nil, run.WithMaxSteps(3), run.WithCheckpointDir(old))
	res := mustPlaced(t, j, run.WithMaxSteps(5), run.WithResume(""))
	if res.ResumedFrom == nil || res.ResumedFrom.Step != 3 || res.CheckpointDir != old {
		t.Errorf("resumed from %+v into %s", res.ResumedFrom, res.CheckpointDir)
	}
	if _, err := os.Lstat(filepath.Join(j.dir, "out", "tiny", folder.LatestName)); err == nil {
		t.Error("resuming the old layout made a latest")
	}
}

// TestAFailedRunLeavesNoFolders: a run given no folder that fails before
// it writes a checkpoint (here its data file is missing) removes the
// folders it made, out/PIPELINE/runs and out/PIPELINE included, and
// leaves alone those that were there before it.
func TestAFailedRunLeavesNoFolders(t *testing.T) {
	const src = `pipeline tab
source rows csv { path "rows.csv"  label kind }
model m { input [2]  dense 2 }
train { epochs 1  batch 10  optimizer adam lr 0.1  loss cross_entropy }
`
	j := newJob(t, src)
	if _, ds := j.runPlaced(t); !ds.HasErrors() {
		t.Fatal("a run with no data file did not fail")
	}
	if _, err := os.Stat(filepath.Join(j.dir, "out")); err == nil {
		t.Errorf("a failed run left %s behind", filepath.Join(j.dir, "out"))
	}
	kept := filepath.Join(j.dir, "out", "tab", "runs", "earlier")
	if err := os.MkdirAll(kept, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ds := j.runPlaced(t); !ds.HasErrors() {
		t.Fatal("a run with no data file did not fail")
	}
	entries, err := os.ReadDir(filepath.Dir(kept))
	if err != nil || len(entries) != 1 || entries[0].Name() != "earlier" {
		t.Errorf("beside an earlier run's folder a failed run left %v (%v), want the earlier one alone", entries, err)
	}
}
