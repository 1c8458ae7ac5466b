package run

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"pipe/engine"
	"strings"
	"time"

	"pipe/dataset"
	"pipe/planner/plan"
	"pipe/run/folder"
	"pipe/stdlib"
)

// Trained is a trained model loaded from a checkpoint for inference:
// serving, export, quantisation and profiling build on it. Its Model is
// built for evaluation on batches of up to Batch samples and, like every
// Model, is not safe for concurrent use; load one Trained per worker.
type Trained struct {
	Plan  *plan.Plan
	Prog  *stdlib.Program
	Graph *stdlib.Graph
	Model engine.Model
	// Config is the configuration Model was built with.
	Config engine.Config
	// Checkpoint is the file the weights came from.
	Checkpoint string
	// State holds the checkpoint's tensors, as SetState took them.
	State engine.State
	// Info is what the checkpoint says about its data.
	Info TrainedInfo
}

// TrainedInfo is what a checkpoint records about the data it was trained
// on, so inputs can be read as training read them and outputs named.
type TrainedInfo struct {
	Pipeline, ModelName string
	// InputShape and OutputShape are one sample's.
	InputShape, OutputShape []int64
	// InputSource is the training source's kind ("idx", "images",
	// "geotiff", "csv", ...); "" in checkpoints written before it was kept.
	InputSource string
	// InputNorm is the training source's input normalisation, applied to
	// raw inputs as x' = (x − Mean[c]) / Std[c]; empty for none or unknown.
	InputNorm dataset.Norm
	// ClassNames names the classes of a classifier, when the source has
	// names (an images source's folders).
	ClassNames []string
	// Target is the regression target's scaling: outputs are restored to
	// the target's units with it. Nil for none.
	Target *TargetScaling
	// Loss is the loss the model was trained with ("cross_entropy", ...).
	Loss string
	// Position is where training stood when the checkpoint was written,
	// Written when (UTC): with the file's folder, which run is loaded.
	Position Position
	Written  time.Time
}

// ErrCheckpointMismatch is wrapped by LoadTrained's errors for a checkpoint
// of another pipeline or model, or one whose tensors do not fit the model.
var ErrCheckpointMismatch = errors.New("the checkpoint does not fit")

// LoadTrained reads the checkpoint at path (a file, or a checkpoint folder
// whose last.ckpt is read), checks that it is the plan's pipeline and
// model, and builds the model on backend for evaluation on batches of up
// to batch samples with threads compute threads (0: GOMAXPROCS), holding
// the checkpoint's weights.
func LoadTrained(p *plan.Plan, prog *stdlib.Program, path string, backend engine.Backend, batch, threads int) (*Trained, error) {
	if p == nil || prog == nil {
		return nil, errors.New("LoadTrained needs a plan and the program it was made from")
	}
	if batch < 1 {
		return nil, fmt.Errorf("batch %d: at least 1", batch)
	}
	meta, st, err := readCheckpoint(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no checkpoint at %s: train first with pipe run, or give --checkpoint", path)
		}
		return nil, err
	}
	if meta.Pipeline != p.Pipeline {
		return nil, fmt.Errorf("%s was written by pipeline %s (%s), not %s: %w", path, meta.Pipeline, folder.OrUnknown(meta.FileAbs, meta.File), p.Pipeline, ErrCheckpointMismatch)
	}
	if meta.Model != p.Model {
		return nil, fmt.Errorf("%s holds model %s, not %s: %w", path, meta.Model, p.Model, ErrCheckpointMismatch)
	}
	if prog.Spec.Model(p.Model) == nil {
		return nil, fmt.Errorf("the plan's model %s is not in the file", p.Model)
	}
	g, ds := prog.Graph(p.Model)
	if ds.HasErrors() || g == nil {
		return nil, fmt.Errorf("model %s does not build: %v", p.Model, ds.Errs().Error())
	}
	cfg := ConfigFromPlan(p, prog)
	cfg.Batch = batch
	cfg.Threads = threads
	m, err := safeBuild(backend, g, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s backend: %w", backend.Name(), err)
	}
	if p.GAN != nil {
		st = generatorState(st) // a gan run's checkpoint: the generator's part
	}
	if err := m.SetState(st); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s does not fit model %s as the file declares it now (was it trained from another version of %s?): %v: %w",
			path, p.Model, p.File, err, ErrCheckpointMismatch)
	}
	t := &Trained{Plan: p, Prog: prog, Graph: g, Model: m, Config: cfg, Checkpoint: path, State: st}
	t.Info = TrainedInfo{
		Pipeline: meta.Pipeline, ModelName: meta.Model,
		InputShape: append([]int64(nil), g.Input...), OutputShape: m.OutShape(),
		InputSource: meta.InputSource, InputNorm: inputNorm(dataset.Norm{Mean: meta.InputMean, Std: meta.InputStd}, g),
		ClassNames: meta.ClassNames, Loss: p.Loss, Position: meta.Position, Written: meta.Written,
	}
	if meta.TargetNormalize == targetStandard && len(meta.TargetMean) > 0 && len(meta.TargetMean) == len(meta.TargetStd) {
		t.Info.Target = &TargetScaling{Mean: meta.TargetMean, Std: meta.TargetStd}
	}
	return t, nil
}

// Predict runs the model in evaluation mode on n samples of normalised
// input x (n·prod(InputShape) values, NCHW) and writes n·prod(OutputShape)
// outputs to out, in the target's units (restored from the training
// scaling for a regression). n may exceed the model's batch: the samples
// run in chunks.
func (t *Trained) Predict(x []float32, n int, out []float32) error {
	in, o := int(numel(t.Info.InputShape)), int(numel(t.Info.OutputShape))
	if len(x) != n*in {
		return fmt.Errorf("input holds %d values; %d samples of %s need %d", len(x), n, shapeString(t.Info.InputShape), n*in)
	}
	if len(out) != n*o {
		return fmt.Errorf("output holds %d values; %d samples of %s need %d", len(out), n, shapeString(t.Info.OutputShape), n*o)
	}
	b := t.Config.Batch
	for i := 0; i < n; i += b {
		k := min(b, n-i)
		if _, err := t.Model.Eval(&dataset.Batch{N: k, X: x[i*in : (i+k)*in]}, out[i*o:(i+k)*o]); err != nil {
			return err
		}
	}
	if t.Info.Target != nil {
		t.Info.Target.restore(out, n, o)
	}
	return nil
}

// Normalize applies the training source's input normalisation in place to
// n raw samples of x: per channel for images and rasters (the first axis
// of InputShape), per column for tables.
func (t *Trained) Normalize(x []float32, n int) {
	nm := t.Info.InputNorm
	if len(nm.Mean) == 0 || len(nm.Mean) != len(nm.Std) {
		return
	}
	in := int(numel(t.Info.InputShape))
	k := len(nm.Mean)
	per := in / k
	if per*k != in {
		return
	}
	for i := range n {
		v := x[i*in : (i+1)*in]
		for c := range k {
			m, s := float32(nm.Mean[c]), float32(nm.Std[c])
			w := v[c*per : (c+1)*per]
			for j := range w {
				w[j] = (w[j] - m) / s
			}
		}
	}
}

// Rebuild builds t's model afresh on backend, from its graph and
// configuration, and gives it the weights t was loaded with (State, not
// the checkpoint file, which may have changed since): what pipe serve
// does for a worker whose process died. t is left as it is; the copy
// returned holds the new model.
func (t *Trained) Rebuild(backend engine.Backend) (*Trained, error) {
	m, err := safeBuild(backend, t.Graph, t.Config)
	if err != nil {
		return nil, fmt.Errorf("%s backend: %w", backend.Name(), err)
	}
	if err := m.SetState(t.State); err != nil {
		m.Close()
		return nil, fmt.Errorf("restoring the weights of %s: %w", t.Checkpoint, err)
	}
	r := *t
	r.Model = m
	return &r, nil
}

// Close releases the model.
func (t *Trained) Close() error {
	if t == nil || t.Model == nil {
		return nil
	}
	return t.Model.Close()
}

// generatorState is a gan run's state without the discriminator's tensors
// and counters (those under ganPrefix, and the d_steps counter).
func generatorState(s engine.State) engine.State {
	g := engine.State{Counters: map[string]int64{}}
	for _, t := range s.Tensors {
		if !strings.HasPrefix(t.Name, ganPrefix) {
			g.Tensors = append(g.Tensors, t)
		}
	}
	for k, v := range s.Counters {
		if !strings.HasPrefix(k, ganPrefix) && k != ganStepCounter {
			g.Counters[k] = v
		}
	}
	return g
}

// CalibrationBatches reads the first n batches of the training split of
// the file's train source, in order, at the plan's batch size and
// normalised as training normalised them: what int8 calibrates its
// activation scales on, as a run's predict does. base resolves the
// file's relative paths ("" for the current directory).
func (t *Trained) CalibrationBatches(ctx context.Context, base string, n int) ([]*dataset.Batch, error) {
	rc := &runConfig{base: base}
	r := &runner{p: t.Plan, prog: t.Prog, spec: t.Prog.Spec, rc: rc, graph: t.Graph, set: settingsOf(t.Prog.Spec, rc)}
	b := t.Prog.Spec.TrainSource()
	if b == nil {
		return nil, errors.New("the file has no train source to calibrate on")
	}
	sp, err := dataset.OpenSplit(b, r.dataOptions(b)...)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", b.Name, err)
	}
	defer sp.All.Close()
	r.data.train = sp.Train
	calib, err := r.calibrationBatches(ctx, n)
	if err == nil && len(calib) == 0 {
		err = fmt.Errorf("source %s: the training split has no samples", b.Name)
	}
	return calib, err
}
