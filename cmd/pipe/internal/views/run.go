package views

import (
	"fmt"
	"io"

	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/report"
	"pipe/workflow"
)

// FellBack warns that device auto's GPU was given up for the CPU.
func FellBack(w io.Writer, fb *workflow.Fallback) {
	fmt.Fprintf(w, "pipe run: warning: device auto found %s, but the torch engine cannot start (%s); training on the CPU with the native engine instead\n",
		fb.Device, fb.Reason())
}

// RefusePlanFile says why the plan file at path (p) is not run.
func RefusePlanFile(w io.Writer, path string, p *plan.Plan, r *workflow.Recheck) {
	switch r.Verdict {
	case workflow.SourceChanged:
		fmt.Fprintf(w, "pipe run: refusing to run %s: %v\n", path, r.Changed)
	case workflow.Unplannable:
		fmt.Fprintf(w, "pipe run: refusing to run %s: planned again for %s at batch %d, it has the errors above; run pipe plan again\n",
			path, p.Device.Name, p.BatchSize)
	case workflow.Moved:
		again := r.Again
		fmt.Fprintf(w, "pipe run: refusing to run %s: planned again for %s at batch %d, it needs %s of a %s budget (the file says %s, %d accumulation steps where it says %d); it was edited or made on another machine: run pipe plan again\n",
			path, p.Device.Name, p.BatchSize, planner.FormatBytes(again.Memory.Total), planner.FormatBytes(again.Memory.Budget),
			planner.FormatBytes(p.Memory.Total), again.AccumulationSteps, p.AccumulationSteps)
	case workflow.NoFit:
		fmt.Fprintf(w, "pipe run: %s does not fit %s: it needs %s of a %s budget (pipe plan shows where it goes)\n",
			path, p.Device.Name, planner.FormatBytes(p.Memory.Total), planner.FormatBytes(p.Memory.Budget))
	}
}

// OutputError says a run's report or trace cannot be written.
func OutputError(w io.Writer, err *workflow.OutputError) {
	switch err.What {
	case "trace":
		fmt.Fprintf(w, "pipe run: cannot write the profile's trace: %v; nothing was trained (give --profile-out a path that can be written)\n", err.Err)
	default:
		fmt.Fprintf(w, "pipe run: cannot write the report: %v; nothing was trained (give --report a path that can be written)\n", err.Err)
	}
}

// RunEnd shows what the end of a run wrote: on stderr what could not be
// written, on stdout the run's summary.
func RunEnd(stdout, stderr io.Writer, res *run.Result, wr *workflow.Written) {
	if wr.Kept != "" {
		fmt.Fprintf(stderr, "pipe run: nothing was trained; %s is left as the last run wrote it\n", wr.Kept)
		return
	}
	if wr.CurveErr != nil {
		fmt.Fprintf(stderr, "pipe run: writing the loss curve: %v\n", wr.CurveErr)
	}
	if wr.ReportErr != nil {
		fmt.Fprintf(stderr, "pipe run: writing the report: %v\n", wr.ReportErr)
	}
	if wr.Summary {
		report.Summary(stdout, res, wr.Report, wr.Curve)
	}
}

// NodeShare says, on each node of a multi-node run (each rank under a
// launcher), how many training samples it read: its share of those the
// job trained. who is "node N of M" or "rank R of W".
func NodeShare(w io.Writer, who string, res *run.Result) {
	fmt.Fprintf(w, "pipe run: %s read %d training samples; the job trained %d\n", who, res.SamplesRead, res.SamplesTrained)
}

// Again is what continuing an interrupted run takes: its
// --checkpoint-dir and --plan as given, its file as shown, the rank of
// the process that says it, the other flags the command gives, and the
// run's settings as flags (Own), which a resume takes from the run's
// folder and a run from the start needs. EveryNode says the command is
// each node's (RANK in it the node's rank), and gives Own too.
type Again struct {
	CheckpointDir, Plan, File string
	Rank                      int
	Flags, Own                []string
	EveryNode                 bool
}

// Interrupted says where an interrupted run stopped, what it saved and
// how to go on. Only rank 0 says how: the other ranks wrote nothing.
func Interrupted(w io.Writer, res *run.Result, a Again) {
	if a.Rank > 0 {
		if res.Stalled != "" {
			fmt.Fprintf(w, "pipe run: interrupted at epoch %d, step %d, while a peer rank was stalled: %s; the step could not finish, and rank 0's last checkpoint is kept\n",
				res.Position.Epoch+1, res.Position.Step, res.Stalled)
			return
		}
		fmt.Fprintf(w, "pipe run: interrupted at epoch %d, step %d; rank 0 writes the checkpoint and says how to continue\n",
			res.Position.Epoch+1, res.Position.Step)
		return
	}
	words := func(flags ...[]string) string {
		s := ""
		if a.CheckpointDir != "" {
			s += "--checkpoint-dir " + run.ShellQuote(a.CheckpointDir) + " "
		}
		if a.Plan != "" {
			s += "--plan " + run.ShellQuote(a.Plan) + " "
		}
		for _, fl := range flags {
			for _, f := range fl {
				s += f + " "
			}
		}
		return s + run.ShellQuote(a.File)
	}
	again, fresh := "pipe run --resume "+words(a.Flags), "pipe run "+words(a.Flags, a.Own)
	if a.EveryNode {
		again = "on every node, pipe run --resume " + words(a.Flags, a.Own) + " (RANK the node's rank)"
		fresh = "on every node, " + fresh + " (RANK the node's rank)"
	}
	if res.Job != "" {
		// A start of the job continues its run by itself.
		again = "the same command in job " + res.Job + " (pipe run --run-id " + res.Job + " " + words(a.Flags) + " elsewhere)"
	}
	var where string
	switch {
	case res.Stalled != "" && res.Checkpoint == "":
		where, again = ", while a peer rank was stalled: "+res.Stalled+"; the step could not finish, and no checkpoint was written", fresh
	case res.Stalled != "":
		where = ", while a peer rank was stalled: " + res.Stalled + "; the step could not finish, so nothing since the last checkpoint was saved, and that checkpoint, " + res.Checkpoint + ", is kept"
	case res.SamplesTrained == 0 && res.ResumedFrom == nil:
		where, again = "; nothing was trained, so no checkpoint was written", fresh
	case res.SamplesTrained == 0:
		where = "; nothing was trained since " + res.Checkpoint + ", which is unchanged"
	case res.Checkpoint == "":
		where = "; no checkpoint was written (save none)"
	default:
		where = "; checkpoint written to " + res.Checkpoint
	}
	fmt.Fprintf(w, "pipe run: interrupted at epoch %d, step %d%s; continue with: %s\n",
		res.Position.Epoch+1, res.Position.Step, where, again)
}
