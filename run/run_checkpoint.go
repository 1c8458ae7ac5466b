package run

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"pipe/engine"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"pipe/dataset"
	"pipe/run/folder"
	"pipe/stdlib"
)

// Checkpoint files: package folder frames them (a header with lengths
// and a checksum, this metadata, the tensors' values) and writes them
// atomically; run says what the metadata holds and which files a run
// keeps (train's checkpoint: auto keeps last.ckpt and best.ckpt, all
// also epoch-NNN.ckpt). Layout and rules: docs/design/checkpoint-files.md.

// checkpointMeta is a checkpoint's metadata.
type checkpointMeta struct {
	Pipeline, Model, File, SourceSHA256, Backend string
	// Overrides are the --set flags the file was run with (plan.Plan's).
	Overrides []string
	// FileAbs is the source file's absolute path ("" in checkpoints
	// written before it was kept, and for standard input). Only a
	// checkpoint without Structure is matched to its pipeline by it.
	FileAbs string
	// Structure fingerprints the model's graph (structureOf) and
	// OptimizerKind and LossKind name what trained it: with the pipeline's
	// and the model's names they identify a pipeline by its content, so
	// the same file resumes after its folder moved or on another machine.
	Structure, OptimizerKind, LossKind string
	BatchSize, AccumulationSteps       int64
	// WorldSize is the devices that trained together (0 in checkpoints
	// written before data parallelism: 1).
	WorldSize    int
	Seed         int64
	Threads      int
	Epochs       int
	Position     Position
	StepLosses   []float64
	EpochResults []EpochResult
	BestLoss     float64
	HasBest      bool
	// StepLimit is the --max-steps (WithMaxSteps) that stopped the run
	// that wrote the file short of the file's steps; 0 when none did.
	StepLimit    int64
	TrainSeconds float64
	Reason       string
	Written      time.Time
	Tensors      []tensorMeta
	Counters     map[string]int64
	// TargetNormalize is how the regression target was scaled for
	// training, "standard" or "none" ("" in checkpoints written before
	// targets were scaled: raw); TargetMean and TargetStd the numbers
	// when standard (run_target.go).
	TargetNormalize       string
	TargetMean, TargetStd []float64
	// InputMean and InputStd are the training source's input
	// normalisation (empty for none, and in checkpoints written before it
	// was kept), InputSource the source's kind and ClassNames its class
	// names: what serving needs to read raw inputs as training did.
	InputMean, InputStd []float64
	InputSource         string
	ClassNames          []string
}

type tensorMeta struct {
	Name  string
	Shape []int64
	Len   int
}

// encodeCheckpoint writes a checkpoint of meta and st to w.
func encodeCheckpoint(w io.Writer, meta *checkpointMeta, st engine.State) error {
	meta.Tensors = meta.Tensors[:0]
	data := make([][]float32, len(st.Tensors))
	for i, t := range st.Tensors {
		meta.Tensors = append(meta.Tensors, tensorMeta{Name: t.Name, Shape: t.Shape, Len: len(t.Data)})
		data[i] = t.Data
	}
	meta.Counters = st.Counters
	return folder.EncodeCheckpoint(w, meta, data)
}

// readCheckpoint reads and verifies a checkpoint file.
func readCheckpoint(path string) (*checkpointMeta, engine.State, error) {
	var meta checkpointMeta
	d, err := folder.ReadCheckpoint(path, &meta)
	if err != nil {
		return nil, engine.State{}, err
	}
	st := engine.State{Counters: meta.Counters}
	var off uint64
	for _, t := range meta.Tensors {
		n := uint64(t.Len)
		if off+n*4 > uint64(len(d)) {
			return nil, engine.State{}, folder.Bad(path, "tensor %s runs past the end of the data", t.Name)
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[off+uint64(i)*4:]))
		}
		off += n * 4
		st.Tensors = append(st.Tensors, engine.Tensor{Name: t.Name, Shape: t.Shape, Data: data})
	}
	if off != uint64(len(d)) {
		return nil, engine.State{}, folder.Bad(path, "%d bytes of tensor data left over", uint64(len(d))-off)
	}
	return &meta, st, nil
}

// readCheckpointMeta reads a checkpoint's metadata alone (folder.ReadMeta).
func readCheckpointMeta(path string) (*checkpointMeta, error) {
	var meta checkpointMeta
	if err := folder.ReadMeta(path, &meta); err != nil {
		return nil, err
	}
	return &meta, nil
}

// effectiveThreads is Config.Threads as the backend reads it: 0 is
// GOMAXPROCS.
func effectiveThreads(n int) int {
	if n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// meta is the run's checkpoint metadata now.
func (r *runner) meta(reason string) *checkpointMeta {
	p := r.p
	m := &checkpointMeta{
		Pipeline: p.Pipeline, Model: p.Model, File: p.File, FileAbs: folder.AbsSource(p.File), SourceSHA256: p.SourceSHA256, Backend: r.backend.Name(),
		Structure: structureOf(r.graph), OptimizerKind: p.Optimizer.Kind, LossKind: p.Loss,
		BatchSize: p.BatchSize, AccumulationSteps: max(p.AccumulationSteps, 1), WorldSize: p.WorldSize(), Seed: r.set.seed, Threads: effectiveThreads(r.rc.threads),
		Epochs: r.set.epochs, Position: r.pos, StepLosses: r.res.StepLosses, EpochResults: r.res.EpochResults,
		BestLoss: r.bestLoss, HasBest: r.hasBest, TrainSeconds: r.res.TrainSeconds, Reason: reason, Written: time.Now().UTC(),
		TargetNormalize: r.data.targetMode, Overrides: p.Overrides,
	}
	if r.rc.maxSteps > 0 && r.rc.maxSteps < r.sched.total {
		m.StepLimit = r.rc.maxSteps
	}
	if s := r.data.scaling; s != nil {
		m.TargetMean, m.TargetStd = s.Mean, s.Std
	}
	if n := r.data.norm; n != nil {
		in := inputNorm(*n, r.graph)
		m.InputMean, m.InputStd = in.Mean, in.Std
	}
	if b := r.data.trainSrc; b != nil {
		m.InputSource = b.Kind
	}
	if r.data.split != nil {
		if root, _ := dataset.Root(r.data.split.All, 0); root != nil {
			if cn, ok := root.(dataset.ClassNamer); ok {
				m.ClassNames = cn.ClassNames()
			}
		}
	}
	return m
}

// checkpoint writes the files train's checkpoint mode asks for: last.ckpt
// always, epoch-NNN.ckpt under all after an epoch, best.ckpt when best.
// It returns false (with a diagnostic) when a write failed.
func (r *runner) checkpoint(reason string, best bool) bool {
	if r.set.ckptMode == "none" {
		return true
	}
	if r.rc.nodeRank > 0 {
		r.rank0Wrote = fmt.Sprintf("%s at step %d", folder.LastCheckpoint, r.pos.Step)
		return true
	}
	st := r.model.State()
	meta := r.meta(reason)
	names := []string{folder.LastCheckpoint}
	if reason == "epoch" && r.set.ckptMode == "all" {
		names = append(names, fmt.Sprintf("epoch-%03d.ckpt", r.pos.Epoch))
	}
	if best {
		names = append(names, folder.BestCheckpoint)
	}
	if r.folder.Stale() && !r.clearStale() {
		return false
	}
	if !r.folder.Written() && !r.recordSettings() {
		return false
	}
	for _, name := range names {
		path, err := r.folder.Write(name, func(w io.Writer) error { return encodeCheckpoint(w, meta, st) }, r.rc.wrapCheckpoint)
		if err != nil {
			fix := "free some space or give another folder with --checkpoint-dir"
			if !errors.Is(err, syscall.ENOSPC) {
				fix = "give another folder with --checkpoint-dir"
			}
			kept := "No earlier checkpoint was there, so the steps trained are lost: " + fix + ", then run again."
			lastPath := filepath.Join(r.set.ckptDir, folder.LastCheckpoint)
			if _, serr := os.Stat(path); serr == nil {
				kept = "The previous " + name + " is intact: " + fix + ", then continue from it with --resume."
			} else if _, serr := os.Stat(lastPath); serr == nil && name != folder.LastCheckpoint {
				kept = lastPath + " is intact: " + fix + ", then continue from it with --resume."
			}
			r.res.Status = StatusFailed
			r.errorf(nil, CodeCheckpoint, "cannot write checkpoint "+path, "%s. %s", diskFull(err), kept)
			return false
		}
		if name == folder.LastCheckpoint {
			r.res.Checkpoint = path
			r.markLatest()
		}
		r.log.Debug("checkpoint written", "path", path, "reason", reason)
		if r.hooks.Checkpoint != nil {
			r.hooks.Checkpoint(path, reason)
		}
	}
	// To an object store, last.ckpt goes last: it is what a restart
	// continues, so the files it would find beside it are there first.
	return r.publish(append(names[1:], names[0])...)
}

// resume loads the checkpoint to continue from and restores the model and
// the position.
func (r *runner) resume() bool {
	path := r.folder.ResumeFrom(r.rc.resumeAt)
	meta, st, err := readCheckpoint(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			r.errorf(nil, CodeResume, "no checkpoint to resume from",
				"There is no %s. A run writes it after every epoch and when it is interrupted; run without --resume to start afresh, or give --checkpoint-dir.", path)
		} else {
			r.errorf(nil, CodeResume, "cannot resume", "%v.%s", err, intactOthers(path))
		}
		return false
	}
	p := r.p
	if !r.samePipeline(path, meta) || !r.sameOverrides(path, meta) {
		return false
	}
	batch, ok := r.resumeBatch(path, meta)
	if !ok {
		return false
	}
	if err := r.model.SetState(st); err != nil {
		r.errorf(rangeOf(r.mspec.NameRange), CodeResume, "the checkpoint does not fit the model", "%s: %v.", path, err)
		return false
	}
	r.adoptTarget(path, meta.TargetNormalize, meta.TargetMean, meta.TargetStd)
	if meta.Structure != "" && meta.Structure != structureOf(r.graph) {
		r.warnf(nil, CodeResume, "the model's layers changed since the checkpoint",
			"%s was written by model %s with other layers; its tensors fit the model as the file declares it now, so the run continues with them.", path, p.Model)
	}
	// Warnings about a checkpoint that loaded; one that did not fit says only that.
	if meta.SourceSHA256 != p.SourceSHA256 && slices.Equal(meta.Overrides, p.Overrides) {
		r.warnf(nil, CodeResume, "the source changed since the checkpoint",
			"%s was written from another version of %s; the run continues with the weights it holds.", path, p.File)
	}
	if threads := effectiveThreads(r.rc.threads); meta.Threads != threads {
		r.warnf(nil, CodeResume, "the number of threads changed since the checkpoint",
			"%s was written by a run with %d compute threads and this one has %d: sums are split differently, so the losses may differ from an uninterrupted run's in their last bits. Give --threads %d to reproduce them exactly.",
			path, meta.Threads, threads, meta.Threads)
	}
	if meta.Seed != r.set.seed {
		r.warnf(nil, CodeResume, "the seed changed since the checkpoint",
			"%s was written with seed %d and this run has seed %d: the batches from here on differ from the first run's.", path, meta.Seed, r.set.seed)
	}
	r.pos = meta.Position
	r.pos.Batch, r.pos.EpochSamples = batch, epochSamples(meta, r.data.train.Len())
	r.res.StepLosses = meta.StepLosses
	r.res.EpochResults = meta.EpochResults
	r.res.Epochs = len(meta.EpochResults)
	r.res.Position = r.pos
	r.bestLoss, r.hasBest = meta.BestLoss, meta.HasBest
	if !r.resumesHere() {
		// Continued in another folder, the run is a new one there: its
		// best.ckpt is the first it writes, never the other folder's.
		r.hasBest = false
	}
	pos := r.pos
	r.res.ResumedFrom = &pos
	r.res.Checkpoint = path
	r.log.Info("resumed", "checkpoint", path, "epoch", pos.Epoch+1, "batch", pos.Batch, "step", pos.Step, "samples", pos.Samples)
	return true
}

// resumeBatch is the micro-batch of the checkpoint's epoch at which this
// run continues it: the samples of the epoch the checkpoint trained, in
// this run's micro-batches. A checkpoint of another batch, accumulation
// or number of devices continues, with a note, when its optimizer step
// trained as many samples as this run's: the epoch's samples are visited
// in the same order whatever the batch (the loader shuffles samples by
// seed and epoch), an epoch has the same number of steps, and the
// learning-rate schedule, which counts steps, gives every step the same
// rate. One whose step trained other samples is refused.
// Details: docs/design/scale-out.md.
func (r *runner) resumeBatch(path string, meta *checkpointMeta) (int, bool) {
	p := r.p
	k, w := max(p.AccumulationSteps, 1), int64(p.WorldSize())
	mk, mw := max(meta.AccumulationSteps, 1), int64(max(meta.WorldSize, 1))
	step, mstep := p.BatchSize*k*w, meta.BatchSize*mk*mw
	if step != mstep {
		fix := fmt.Sprintf("Continue on %d devices as the checkpoint's run did", mw)
		if mstep%(w*k) == 0 {
			fix = fmt.Sprintf("Plan a step of %d samples (--batch %d with %d accumulation steps on %d devices)", mstep, mstep/(w*k), k, w)
		}
		r.errorf(nil, CodeResume, "the checkpoint was trained with another step",
			"%s was written by a run of %d samples an optimizer step (%d a device × %d accumulation steps × %d devices); this plan's step is %d samples (%d × %d × %d). The step count and the learning-rate schedule would not line up with the samples trained. %s, or start afresh without --resume.",
			path, mstep, meta.BatchSize, mk, mw, step, p.BatchSize, k, w, fix)
		return 0, false
	}
	bs := int64(r.globalBatch())
	n := r.data.train.Len()
	done, epoch := epochSamples(meta, n), min(int64(n), int64(r.nb)*bs)
	pos := meta.Position
	var batch int
	switch {
	case done > epoch:
		r.errorf(nil, CodeResume, "the checkpoint does not fit the data",
			"%s stopped after %d samples of epoch %d, but an epoch of the training data now has %d samples.", path, done, pos.Epoch+1, epoch)
		return 0, false
	case done == epoch:
		batch = r.nb // trained, not yet evaluated
	case done%bs != 0:
		r.errorf(nil, CodeResume, "the checkpoint stopped inside a batch of this run",
			"%s stopped after %d samples of epoch %d, which is no whole number of this run's batches of %d samples (%d a device × %d devices). Continue with the checkpoint's batch, %d a device on %d devices, or start afresh without --resume.",
			path, done, pos.Epoch+1, bs, p.BatchSize, w, meta.BatchSize, mw)
		return 0, false
	default:
		batch = int(done / bs)
	}
	if meta.BatchSize != p.BatchSize || mk != k || mw != w {
		r.notef(nil, CodeResume, "the checkpoint's step is split differently",
			"%s was written by a run of %d a device × %d accumulation steps × %d devices, and this one is %d × %d × %d: both train %d samples an optimizer step, so the run continues at sample %d of epoch %d, step %d, with the same learning-rate schedule. Sums are split differently, so the losses may differ from an uninterrupted run's in their last bits.",
			path, meta.BatchSize, mk, mw, p.BatchSize, k, w, step, done, pos.Epoch+1, pos.Step)
	}
	return batch, true
}

// epochSamples is the samples of its epoch that a checkpoint trained: as
// it says, or in a checkpoint written before they were kept, its batches
// of its own size (all whole but an epoch's last).
func epochSamples(meta *checkpointMeta, n int) int64 {
	pos := meta.Position
	if pos.EpochSamples > 0 || pos.Batch == 0 {
		return pos.EpochSamples
	}
	return min(int64(pos.Batch)*meta.BatchSize*int64(max(meta.WorldSize, 1)), int64(n))
}

// intactOthers names the checkpoints beside path that read back whole,
// with their position, for the message of a path that does not.
func intactOthers(path string) string {
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.ckpt"))
	var ok []string
	for _, f := range files {
		if f == path {
			continue
		}
		if meta, _, err := readCheckpoint(f); err == nil {
			ok = append(ok, fmt.Sprintf("%s (epoch %d, step %d)", f, meta.Position.Epoch, meta.Position.Step))
		}
	}
	if len(ok) == 0 {
		return " No other checkpoint in its folder reads back whole: start afresh without --resume."
	}
	return fmt.Sprintf(" These read back whole: %s; continue from one with --resume=%s.", strings.Join(ok, ", "), strings.SplitN(ok[0], " (", 2)[0])
}

// samePipeline reports (with a diagnostic when not) whether the
// checkpoint at path was written by this pipeline, so that resuming it
// continues this pipeline's training (otherPipeline says how it differs).
func (r *runner) samePipeline(path string, meta *checkpointMeta) bool {
	if m := r.otherPipeline(path, meta); m != nil {
		detail := m.Fact + "."
		if m.ResumeFix != "" {
			detail += " " + m.ResumeFix
		}
		r.errorf(nil, CodeResume, m.Summary, "%s", detail)
		return false
	}
	if meta.LossKind != "" && meta.LossKind != r.p.Loss {
		r.warnf(nil, CodeResume, "the loss changed since the checkpoint",
			"%s was trained with loss %s; this run goes on with %s.", path, meta.LossKind, r.p.Loss)
	}
	return true
}

// sameOverrides reports (with a diagnostic when not) whether the run
// has the --set overrides the checkpoint was trained with. A run that
// continues its own folder must have them: with others it would train
// another configuration under the first one's name and position (a
// run's length, its schedule). One started from a checkpoint elsewhere
// (--resume=PATH) is a new run, and a difference is only said.
func (r *runner) sameOverrides(path string, meta *checkpointMeta) bool {
	if slices.Equal(meta.Overrides, r.p.Overrides) {
		return true
	}
	was, now := SetFlags(meta.Overrides), SetFlags(r.p.Overrides)
	if !r.resumesHere() {
		r.warnf(nil, CodeResume, "the overrides differ from the checkpoint's",
			"%s was trained with %s; this run has %s.", path, was, now)
		return true
	}
	r.errorf(nil, CodeResume, "the run was started with other overrides",
		"%s was trained with %s, and this run has %s, so nothing was trained. Continue it with %s, or start a new run from the checkpoint with --resume=%s.",
		path, was, now, was, path)
	return false
}

// SetFlags is overrides as the --set flags that give them, each quoted
// for a shell where it needs it; "no --set" for none.
func SetFlags(overrides []string) string {
	if len(overrides) == 0 {
		return "no --set"
	}
	out := make([]string, len(overrides))
	for i, o := range overrides {
		out[i] = "--set " + ShellQuote(o)
	}
	return strings.Join(out, " ")
}

// ShellQuote is s as a POSIX shell reads it back: as it is when it holds
// only letters, digits and _ . / = : , @ + -, else in single quotes.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,@+-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// otherPipeline says how the checkpoint at path differs from this run's
// pipeline, nil when it is this pipeline's (folder.Identity.Differs).
func (r *runner) otherPipeline(path string, meta *checkpointMeta) *folder.Mismatch {
	return r.identity().Differs(path, folder.Identity{Pipeline: meta.Pipeline, Model: meta.Model, File: meta.File,
		FileAbs: meta.FileAbs, Structure: meta.Structure, OptimizerKind: meta.OptimizerKind, LossKind: meta.LossKind})
}

// structureOf fingerprints a model's graph: every node's name, op,
// inputs, output shape and parameter count, which fix what its
// checkpoint's tensors mean (SHA-256, hex).
func structureOf(g *stdlib.Graph) string {
	if g == nil {
		return ""
	}
	h := sha256.New()
	for _, n := range g.Nodes {
		fmt.Fprintf(h, "%s\x00%s\x00%v\x00%v\x00%d\n", n.Name, n.Op, n.Inputs, n.Out, n.Params)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// inputNorm is a source's normalisation as the model's input sees it: a
// GeoTIFF source with target bands normalises them too, after the input
// bands, and only the input's channels belong with the model (an export
// stored 4 means for a 3-band input).
func inputNorm(n dataset.Norm, g *stdlib.Graph) dataset.Norm {
	if g == nil || len(g.Input) < 3 || len(n.Mean) != len(n.Std) {
		return n
	}
	if c := int(g.Input[0]); c > 0 && len(n.Mean) > c {
		return dataset.Norm{Mean: n.Mean[:c], Std: n.Std[:c]}
	}
	return n
}
