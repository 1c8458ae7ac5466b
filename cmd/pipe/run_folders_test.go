package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/run/folder"
)

// TestEveryRunHasItsOwnFolder: pipe run given no folder writes each
// run's checkpoints, report and loss curve into a folder of its own under
// out/PIPELINE/runs; a short run (--max-steps) after a full one is the
// latest, with no best.ckpt of its own, and --resume continues it there;
// but pipe serve and pipe export load the full run's best.ckpt, saying
// which run and step and warning that the latest was passed over, and
// given the short run they warn that it was cut short; a run of another
// pipeline is refused its folder.
func TestEveryRunHasItsOwnFolder(t *testing.T) {
	fixedHost(t)
	dir, file := tiny(t, servePipe)
	t.Chdir(dir)
	for _, args := range [][]string{{"run", "--threads", "1", file}, {"run", "--threads", "1", "--max-steps", "2", file}} {
		if code, _, stderr := runPipe(t, "", args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	runs, _ := filepath.Glob(filepath.Join("out", "tiny", "runs", "*"))
	if len(runs) != 2 {
		t.Fatalf("run folders %v, want two", runs)
	}
	full, short := runs[0], runs[1]
	for _, f := range []string{filepath.Join(full, folder.BestCheckpoint), filepath.Join(full, "report.json"), filepath.Join(full, "report-loss.png"),
		filepath.Join(short, folder.LastCheckpoint), filepath.Join(short, "report.json")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("missing: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(short, folder.BestCheckpoint)); err == nil {
		t.Errorf("the short run has a best.ckpt")
	}
	if _, err := os.Stat(filepath.Join("out", "tiny", "report.json")); err == nil {
		t.Errorf("a report was written to out/tiny, shared by every run")
	}
	loaded := "run " + full + ": best.ckpt (step 4, 1 epoch done"
	passed := "warning: the latest run, " + short + ", was cut short by --max-steps 2 (step 2, 0 of 1 epoch done); loading " + filepath.Join(full, folder.BestCheckpoint)
	if _, stderr := serveOne(t, file, "", make([]float32, 16)); !strings.Contains(stderr, loaded) || !strings.Contains(stderr, passed) {
		t.Errorf("pipe serve does not say %q and %q:\n%s", loaded, passed, stderr)
	}
	code, stdout, stderr := runPipe(t, "", "export", "--onnx", filepath.Join(dir, "m.onnx"), file)
	if code != exitOK || !strings.Contains(stdout, loaded) || !strings.Contains(stderr, passed) {
		t.Errorf("pipe export: exit %d, does not say %q and %q:\n%s%s", code, loaded, passed, stdout, stderr)
	}
	cut := "warning: " + filepath.Join(short, folder.LastCheckpoint) + " is of a run cut short by --max-steps 2 (step 2, 0 of 1 epoch done)"
	if _, stderr := serveOne(t, file, short, make([]float32, 16)); !strings.Contains(stderr, "run "+short+": last.ckpt (step 2") || !strings.Contains(stderr, cut) {
		t.Errorf("pipe serve --checkpoint of the short run does not say %q:\n%s", cut, stderr)
	}

	if code, _, stderr := runPipe(t, "", "run", "--threads", "1", "--resume", "--max-steps", "3", file); code != exitOK {
		t.Fatalf("--resume: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Steps       int64          `json:"steps"`
		ResumedFrom map[string]any `json:"resumed_from"`
	}
	b, _ := os.ReadFile(filepath.Join(short, "report.json"))
	if err := json.Unmarshal(b, &rep); err != nil || rep.Steps != 3 || rep.ResumedFrom == nil {
		t.Errorf("the latest run's report after --resume: %s (%v)", b, err)
	}

	other := filepath.Join(dir, "other.pipe")
	os.WriteFile(other, []byte(strings.Replace(servePipe, "pipeline tiny", "pipeline other", 1)), 0o644)
	code, _, stderr = runPipe(t, "", "run", "--max-steps", "1", "--checkpoint-dir", short, other)
	if code != exitErrors || !strings.Contains(stderr, "the checkpoint folder is another pipeline's") {
		t.Errorf("another pipeline into the run's folder: exit %d\n%s", code, stderr)
	}
}

// TestResumeWithoutARun: --resume with no run to resume says so, and
// trains nothing.
func TestResumeWithoutARun(t *testing.T) {
	fixedHost(t)
	dir, file := tiny(t, servePipe)
	t.Chdir(dir)
	code, _, stderr := runPipe(t, "", "run", "--resume", file)
	if code != exitErrors || !strings.Contains(stderr, "no run to resume") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join("out", "tiny", "runs")); err == nil {
		t.Error("a refused --resume made a run folder")
	}
}
