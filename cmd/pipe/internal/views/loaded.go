package views

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"pipe/run"
	"pipe/run/folder"
	"pipe/workflow"
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

// CheckpointChoice warns, on lines that lead starts, when a step limit
// shaped serve's or export's choice of checkpoint: the latest run, cut
// short by --max-steps, was passed over for an earlier run that trained
// further; or the run loaded was cut short itself.
func CheckpointChoice(w io.Writer, lead string, c workflow.CheckpointChoice) {
	if c.PassedOver != "" {
		fmt.Fprintf(w, "%swarning: the latest run, %s, was cut short by --max-steps %d (%s); loading %s, the newest run that trained further. Give --checkpoint %s to load the short run.\n",
			lead, c.PassedOver, c.Passed.StepLimit, standing(c.Passed), c.Path, c.PassedOver)
		return
	}
	if r := c.Run; r != nil && r.StepLimit > 0 {
		fmt.Fprintf(w, "%swarning: %s is of a run cut short by --max-steps %d (%s), not trained as the file asks; continue it with --resume, or give --checkpoint a run that finished.\n",
			lead, c.Path, r.StepLimit, standing(*r))
	}
}

// standing is where a run stood: "step 5, 0 of 5 epochs done".
func standing(i run.CheckpointInfo) string {
	return fmt.Sprintf("step %d, %d of %s done", i.Position.Step, i.Position.Epoch, Count(i.Epochs, "epoch", "epochs"))
}

// PlaceError says why pipe run has no folder to run in.
func PlaceError(w io.Writer, err error) {
	if errors.Is(err, folder.ErrNoRun) {
		fmt.Fprintf(w, "pipe run: --resume: %v; run without --resume to start one, or give the checkpoint with --resume=PATH or the run's folder with --checkpoint-dir\n", err)
		return
	}
	if errors.Is(err, folder.ErrOtherJob) {
		fmt.Fprintf(w, "pipe run: %v; nothing was trained: a job continues its own run and no other's (leave --checkpoint-dir out and each job gets out/PIPELINE/runs/ID)\n", err)
		return
	}
	fmt.Fprintf(w, "pipe run: cannot make the run's folder: %v; give one that can be written with --checkpoint-dir\n", err)
}
