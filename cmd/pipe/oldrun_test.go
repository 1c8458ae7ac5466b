package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/run/folder"
)

// TestResumesARunOfE96e19f: a run folder that pipe wrote before the run
// folder was package folder (run/testdata/e96e19f: a job's run stopped
// by --max-steps after epoch 1 of 2) is today's: pipe serve loads its
// best.ckpt and reads where it stood, a start of its job continues it
// with the settings it records, from step 4 to the end, in its folder,
// and another job is refused the folder its job record gives job1.
func TestResumesARunOfE96e19f(t *testing.T) {
	fixedHost(t)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../run/testdata/e96e19f")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	run := filepath.Join("out", "tiny", "runs", "job1")

	_, stderr := serveOne(t, "tiny.pipe", filepath.Join(run, folder.BestCheckpoint), make([]float32, 16))
	if want := "best.ckpt (step 4, 1 epoch done"; !strings.Contains(stderr, want) {
		t.Errorf("pipe serve does not say %q:\n%s", want, stderr)
	}
	code, _, stderr := runPipe(t, "", "run", "--run-id", "other", "--checkpoint-dir", run, "tiny.pipe")
	if code != exitErrors || !strings.Contains(stderr, "job job1") {
		t.Errorf("another job in job1's folder: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runPipe(t, "", "run", "--run-id", "job1", "tiny.pipe")
	if code != exitOK || !strings.Contains(stderr, "continuing with the run's own settings") || !strings.Contains(stderr, "train.lr=0.04") {
		t.Fatalf("job1's start: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Status      string `json:"status"`
		Steps       int64  `json:"steps"`
		ResumedFrom struct {
			Step int64 `json:"step"`
		} `json:"resumed_from"`
	}
	b, _ := os.ReadFile(filepath.Join(run, "report.json"))
	if err := json.Unmarshal(b, &rep); err != nil || rep.Steps != 8 || rep.ResumedFrom.Step != 4 {
		t.Errorf("job1's report after its start: %s (%v)", b, err)
	}
}
