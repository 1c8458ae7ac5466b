package workflow

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"pipe/lang"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
	"pipe/run/report"
	"pipe/stdlib"
)

// Outputs are the files a run writes besides its checkpoints, decided
// and checked writable before any compute, as the checkpoints are.
type Outputs struct {
	Report string // the run report (JSON)
	Trace  string // the profile's Chrome trace, "" without a profile
}

// OutputError says an output cannot be written; nothing was trained.
type OutputError struct {
	What string // "report" or "trace"
	Err  error
}

func (e *OutputError) Error() string { return "cannot write the " + e.What + ": " + e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

// PlaceRun decides where a run of prog writes (run.PlaceRun): w.Dir when
// given (--checkpoint-dir), else train's checkpoint_dir, else a job's
// folder out/PIPELINE/runs/ID, else for a --resume without a path the
// latest run's folder, else a new folder under out/PIPELINE/runs.
func PlaceRun(prog *stdlib.Program, w run.Where) (run.Place, error) {
	return run.PlaceRun(prog.Spec, "", w)
}

// PrepareOutputs decides where a run of p placed at place writes its
// report (report, else report.json in the run's folder, so that runs in
// two folders never share one) and, when profiling, its trace (trace,
// else trace.json there too), and checks that both can be written;
// on a rank above 0, which writes neither, it checks nothing.
func PrepareOutputs(p *plan.Plan, place run.Place, reportPath string, profile bool, trace string, nodeRank int) (Outputs, error) {
	o := Outputs{Report: reportPath}
	if o.Report == "" {
		o.Report = filepath.Join(place.Dir, "report.json")
	}
	if nodeRank > 0 {
		// Rank 0 writes the report; this rank's checks would make folders.
		o.Trace = trace
		return o, nil
	}
	if err := run.CheckWritable(o.Report); err != nil {
		return o, &OutputError{What: "report", Err: err}
	}
	if !profile {
		return o, nil
	}
	o.Trace = trace
	if o.Trace == "" {
		o.Trace = filepath.Join(place.Dir, "trace.json")
	}
	if err := run.CheckWritable(o.Trace); err != nil {
		return o, &OutputError{What: "trace", Err: err}
	}
	return o, nil
}

// Written is what a run's end wrote: the report and its loss curve.
type Written struct {
	// Report and Curve are the files written, "" for none.
	Report, Curve string
	// Summary says the run's summary is to be shown.
	Summary bool
	// Kept is the report left as the last run wrote it, when this run
	// failed before its first step.
	Kept string
	// CurveErr and ReportErr say a file asked for could not be written.
	CurveErr, ReportErr error
}

// Failed says a file asked for is missing or stale.
func (w *Written) Failed() bool { return w.CurveErr != nil || w.ReportErr != nil }

// Finish writes a run's report and loss curve: a model never built
// reports nothing; on a node of rank above 0 node 0 writes it; a run that
// failed before its first step (a --resume that could not load its
// checkpoint) leaves the last report as it was.
func Finish(res *run.Result, p *plan.Plan, o Outputs, nodeRank int) *Written {
	rp := o.Report
	switch {
	case res.Precision == "":
		return &Written{}
	case nodeRank > 0:
		return &Written{Summary: true}
	case res.Status == run.StatusFailed && res.ResumedFrom == nil && res.Position.Step == 0 && fileExists(rp):
		return &Written{Kept: rp}
	}
	wr := &Written{Summary: true}
	if len(res.StepLosses) > 0 {
		wr.Curve = strings.TrimSuffix(rp, filepath.Ext(rp)) + "-loss.png"
		if err := report.LossCurve(res, wr.Curve); err != nil {
			wr.Curve, wr.CurveErr = "", err
		}
	}
	rep := report.New(res, p)
	if wr.Curve != "" {
		rep.LossCurve = wr.Curve
	}
	wr.Report = rp
	if err := rep.Write(rp); err != nil {
		wr.Report, wr.ReportErr = "", err
	}
	return wr
}

// WriteTrace writes a run's profile as a Chrome trace.
func WriteTrace(pr *run.Profile, path string) error {
	return folder.WriteFileAtomic(path, func(w io.Writer) error { return pr.WriteTrace(w) })
}

// DefaultCheckpoint is the checkpoint pipe serve and pipe export load when
// given none: best.ckpt in the run's folder when there is one, else
// last.ckpt there. The folder is dir, else train's checkpoint_dir, else
// the latest run's (out/PIPELINE/latest, or out/PIPELINE/checkpoints of
// the layout before run folders while there is no latest); with none of
// them, out/PIPELINE/latest/last.ckpt, for the error that reading it gives.
func DefaultCheckpoint(prog *lang.Program, dir string) string {
	if dir == "" {
		root := run.PipelineFolder("", prog.Name)
		dir = filepath.Join(root, folder.LatestName)
		if f := prog.Block("train").Field("checkpoint_dir"); f != nil {
			dir = f.First().Str
		} else if latest, _, err := folder.LatestRun(root); err == nil {
			dir = latest
		}
	}
	return bestOrLast(dir)
}

// CheckpointFile is the checkpoint pipe serve and pipe export load for
// --checkpoint path: the file, or for a folder what DefaultCheckpoint
// takes in it, best.ckpt when there is one, else last.ckpt.
func CheckpointFile(path string) string {
	if folder.CheckpointIn(path, folder.LastCheckpoint) == path {
		return path
	}
	return bestOrLast(path)
}

// bestOrLast is best.ckpt in dir when there is one, else last.ckpt.
func bestOrLast(dir string) string {
	if best := folder.CheckpointIn(dir, folder.BestCheckpoint); fileExists(best) {
		return best
	}
	return filepath.Join(dir, folder.LastCheckpoint)
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
