package workflow

import (
	"os"
	"path/filepath"

	"pipe/lang"
	"pipe/run"
	"pipe/run/folder"
)

// CheckpointChoice is the checkpoint pipe serve and pipe export load, with
// what the views need to say why: the run it belongs to, and the latest
// run it passed over.
type CheckpointChoice struct {
	// Path is the checkpoint file to load.
	Path string
	// Run is what the run that Path belongs to says of itself (its
	// folder's last.ckpt, else Path's own); nil when neither reads.
	Run *run.CheckpointInfo
	// PassedOver is the latest run's folder when --max-steps cut it short
	// and Path is of an earlier run that trained further; Passed is its
	// last.ckpt's info. "" when the latest run was taken.
	PassedOver string
	Passed     run.CheckpointInfo
}

// ChooseCheckpoint is the checkpoint serve and export load: --checkpoint
// flag when given (CheckpointFile), else DefaultCheckpoint's for dir.
// Given neither a folder nor train's checkpoint_dir, a latest run cut
// short by --max-steps (a smoke run after a full one) is passed over
// for the newest run of the same model that trained further without a
// step limit (furtherRun); with none, the latest run is taken, and Run
// says it was cut short.
func ChooseCheckpoint(prog *lang.Program, flag, dir string) CheckpointChoice {
	if flag != "" {
		return describeChoice(CheckpointChoice{Path: CheckpointFile(flag)})
	}
	c := CheckpointChoice{Path: DefaultCheckpoint(prog, dir)}
	if dir != "" || prog.Block("train").Field("checkpoint_dir") != nil {
		return describeChoice(c)
	}
	latest := filepath.Dir(c.Path)
	short, err := run.ReadCheckpointInfo(filepath.Join(latest, folder.LastCheckpoint))
	if err == nil && short.StepLimit > 0 {
		root := run.PipelineFolder("", prog.Name)
		if other := furtherRun(filepath.Join(root, folder.RunsFolder), latest, short); other != "" {
			c = CheckpointChoice{Path: bestOrLast(other), PassedOver: latest, Passed: short}
		}
	}
	return describeChoice(c)
}

// describeChoice fills c.Run from the folder's last.ckpt, which says how
// the run stands (a best.ckpt may predate its run's --max-steps or its
// end), else from the file itself.
func describeChoice(c CheckpointChoice) CheckpointChoice {
	for _, p := range []string{filepath.Join(filepath.Dir(c.Path), folder.LastCheckpoint), c.Path} {
		if info, err := run.ReadCheckpointInfo(p); err == nil {
			c.Run = &info
			break
		}
	}
	return c
}

// furtherRun is the run folder in runs, other than skip, whose last.ckpt
// is the newest written of those of short's pipeline and model (and
// structure, when both files keep it: its weights fit the same model)
// that no step limit cut short and that trained more steps than short;
// "" when there is none.
func furtherRun(runs, skip string, short run.CheckpointInfo) string {
	ents, err := os.ReadDir(runs)
	if err != nil {
		return ""
	}
	best, bestInfo := "", run.CheckpointInfo{}
	for _, e := range ents {
		d := filepath.Join(runs, e.Name())
		if !e.IsDir() || sameDir(d, skip) {
			continue
		}
		info, err := run.ReadCheckpointInfo(filepath.Join(d, folder.LastCheckpoint))
		switch {
		case err != nil, info.StepLimit > 0, info.Pipeline != short.Pipeline, info.Model != short.Model,
			info.Structure != "" && short.Structure != "" && info.Structure != short.Structure,
			info.Position.Step <= short.Position.Step:
			continue
		}
		if best == "" || info.Written.After(bestInfo.Written) {
			best, bestInfo = d, info
		}
	}
	return best
}

// sameDir reports whether a and b name one folder.
func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
