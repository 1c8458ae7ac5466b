package folder

import (
	"fmt"
	"path/filepath"
)

// Identity is whose a checkpoint is: the fields of a checkpoint's
// metadata that name its pipeline (ReadMeta fills them from any
// checkpoint, by name), and the same of a run about to write one.
type Identity struct {
	Pipeline, Model, File string
	// FileAbs is the source file's absolute path ("" in checkpoints
	// written before it was kept, and for standard input). Only a
	// checkpoint without Structure is matched to its pipeline by it.
	FileAbs string
	// Structure fingerprints the model's graph; OptimizerKind and
	// LossKind name what trained it.
	Structure, OptimizerKind, LossKind string
}

// Mismatch is how a checkpoint is not a run's pipeline: the diagnostic's
// summary, the fact (a sentence without its period), and what to do
// instead of resuming it ("" when nothing but the fact needs saying).
type Mismatch struct{ Summary, Fact, ResumeFix string }

// Differs says how the checkpoint at path, whose identity is ck, differs
// from the pipeline of run, nil when it is this pipeline's: another name,
// model or optimizer, wherever its file lies now (a model whose layers
// changed is for the engine to refuse, tensor by tensor). A checkpoint
// written before the structure was kept is matched by its file's
// absolute path, as it was then.
func (run Identity) Differs(path string, ck Identity) *Mismatch {
	another := func(why string) *Mismatch {
		return &Mismatch{"the checkpoint is another pipeline's",
			fmt.Sprintf("%s was written by pipeline %s from %s; this run is pipeline %s from %s%s",
				path, ck.Pipeline, OrUnknown(ck.FileAbs, ck.File), run.Pipeline, OrUnknown(run.FileAbs, run.File), why),
			"Resuming would continue the other training under this one's name. Start afresh without --resume, or give this run its own folder with --checkpoint-dir."}
	}
	switch {
	case ck.Pipeline != run.Pipeline:
		return another("")
	case ck.Model != run.Model:
		return &Mismatch{"the checkpoint is of another model", fmt.Sprintf("%s holds model %s; the plan trains %s", path, ck.Model, run.Model), ""}
	case ck.Structure == "":
		if ck.FileAbs != "" && run.FileAbs != "" && ck.FileAbs != run.FileAbs {
			return another(" (the checkpoint predates content identity, so its file's path must match)")
		}
	case ck.OptimizerKind != "" && ck.OptimizerKind != run.OptimizerKind:
		return &Mismatch{"the checkpoint was trained with another optimizer",
			fmt.Sprintf("%s holds the state of optimizer %s; this plan trains with %s, which would read it as its own", path, ck.OptimizerKind, run.OptimizerKind),
			fmt.Sprintf("Start afresh without --resume, or train with %s.", ck.OptimizerKind)}
	}
	return nil
}

// AbsSource is a source file's absolute path, "" for standard input.
func AbsSource(file string) string {
	if file == "" || file == "-" || file == "<stdin>" {
		return ""
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return ""
	}
	return abs
}

// OrUnknown is s, else alt, else "an unnamed source": a file for messages.
func OrUnknown(s, alt string) string {
	if s != "" {
		return s
	}
	if alt != "" {
		return alt
	}
	return "an unnamed source"
}
