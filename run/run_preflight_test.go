package run_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/run"
	"pipe/run/folder"
)

// A checkpoint folder or a predictions path that cannot be written fails
// the run before it trains, not after.
func TestUnwritableOutputsFailBeforeTraining(t *testing.T) {
	src := blobs + `predict { source blobs  write "preds.csv" }` + "\n"
	t.Run("checkpoints", func(t *testing.T) {
		j := newJob(t, src)
		file := filepath.Join(j.dir, "file")
		writeFile(t, file, "a file, not a folder")
		var steps int
		res, ds := j.run(t, context.Background(), nil, run.Hooks{Step: func(run.StepInfo) { steps++ }},
			run.WithCheckpointDir(filepath.Join(file, "ckpt")))
		d := findDiag(t, ds, run.CodeCheckpoint)
		if steps != 0 || res.SamplesTrained != 0 {
			t.Errorf("%d steps trained before the error", steps)
		}
		if !strings.Contains(d.Summary, "cannot write checkpoints to") || !strings.Contains(d.Detail, "Nothing was trained") {
			t.Errorf("%s: %s", d.Summary, d.Detail)
		}
	})
	t.Run("predictions", func(t *testing.T) {
		j := newJob(t, src)
		if err := os.MkdirAll(filepath.Join(j.dir, "preds.csv"), 0o755); err != nil {
			t.Fatal(err)
		}
		var steps int
		_, ds := j.run(t, context.Background(), nil, run.Hooks{Step: func(run.StepInfo) { steps++ }})
		d := findDiag(t, ds, run.CodePredict)
		if steps != 0 || d.Subject == nil || d.Subject.Start.Line != lineOf(src, "predict") || !strings.Contains(d.Detail, "is a folder") {
			t.Errorf("after %d steps, at %v: %s", steps, d.Subject, d.Detail)
		}
	})
}

// A checkpoint that cannot be written, with no earlier one to fall back
// on, does not tell the user to resume from nothing.
func TestFullDiskWithoutAnEarlierCheckpoint(t *testing.T) {
	j := newJob(t, blobs)
	full := run.WithCheckpointWriter(func(w io.Writer) io.Writer { return &enospc{w: w, n: 100} })
	_, ds := j.run(t, context.Background(), nil, run.Hooks{}, full)
	d := findDiag(t, ds, run.CodeCheckpoint)
	if !strings.Contains(d.Detail, "disk is full") || !strings.Contains(d.Detail, "then run again") || strings.Contains(d.Detail, "--resume") {
		t.Errorf("%s", d.Detail)
	}
}

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if err := run.CheckWritable(filepath.Join(dir, "new", "folder", "x.json")); err != nil {
		t.Errorf("a new folder: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "new", "folder")); len(ents) != 0 {
		t.Errorf("the probe left %v behind", ents)
	}
	if err := run.CheckWritable(dir); err == nil {
		t.Error("a folder is not a file to write")
	}
	writeFile(t, filepath.Join(dir, "f"), "")
	if err := run.CheckWritable(filepath.Join(dir, "f", "x.json")); err == nil {
		t.Error("a file is not a folder to write in")
	}
}

// --resume with an empty checkpoint folder names the file it looked for.
func TestResumeNamesTheMissingFile(t *testing.T) {
	j := newJob(t, blobs)
	_, ds := j.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(""), run.WithCheckpointDir(filepath.Join(j.dir, "none")))
	d := findDiag(t, ds, run.CodeResume)
	if want := filepath.Join(j.dir, "none", folder.LastCheckpoint); !strings.Contains(d.Detail, "There is no "+want+".") {
		t.Errorf("%s", d.Detail)
	}
}

// A checkpoint that does not fit the edited model is refused without a
// warning that "the run continues with the weights it holds".
func TestResumeIntoAnotherModelSaysOnlyThat(t *testing.T) {
	j := newJob(t, blobs)
	mustRun(t, j, nil, run.WithMaxSteps(3))
	edited := newJob(t, strings.Replace(blobs, "dense 3", "dense 4", 1))
	edited.dir = j.dir
	_, ds := edited.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(""))
	d := findDiag(t, ds, run.CodeResume)
	if !strings.Contains(d.Summary, "does not fit the model") {
		t.Fatalf("%s: %s", d.Summary, d.Detail)
	}
	for _, d := range ds {
		if strings.Contains(d.Detail, "continues with the weights") {
			t.Errorf("a failed resume also says: %s", d.Detail)
		}
	}
}
