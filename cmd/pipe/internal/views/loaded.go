package views

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"pipe/run"
)

// Loaded says which run pipe serve or pipe export loads (lead starts the
// line): the run's folder, the checkpoint file in it, and where training
// stood when it was written, so that a model of another run than meant
// is seen at once.
func Loaded(w io.Writer, lead string, t *run.Trained) {
	if t == nil {
		return
	}
	pos := t.Info.Position
	at := fmt.Sprintf("step %d, epoch %d batch %d", pos.Step, pos.Epoch+1, pos.Batch)
	if pos.Batch == 0 {
		at = fmt.Sprintf("step %d, %s done", pos.Step, Count(pos.Epoch, "epoch", "epochs"))
	}
	when := "written at an unknown time"
	if !t.Info.Written.IsZero() {
		when = "written " + t.Info.Written.Local().Format("2006-01-02 15:04:05 MST")
	}
	fmt.Fprintf(w, "%srun %s: %s (%s, %s)\n", lead, filepath.Dir(t.Checkpoint), filepath.Base(t.Checkpoint), at, when)
}

// PlaceError says why pipe run has no folder to run in.
func PlaceError(w io.Writer, err error) {
	if errors.Is(err, run.ErrNoRun) {
		fmt.Fprintf(w, "pipe run: --resume: %v; run without --resume to start one, or give the checkpoint with --resume=PATH or the run's folder with --checkpoint-dir\n", err)
		return
	}
	if errors.Is(err, run.ErrOtherJob) {
		fmt.Fprintf(w, "pipe run: %v; nothing was trained: a job continues its own run and no other's (leave --checkpoint-dir out and each job gets out/PIPELINE/runs/ID)\n", err)
		return
	}
	fmt.Fprintf(w, "pipe run: cannot make the run's folder: %v; give one that can be written with --checkpoint-dir\n", err)
}
