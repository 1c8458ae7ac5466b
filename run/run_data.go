package run

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"pipe/dataset"
	"pipe/diag"
	"pipe/run/metric"
	"pipe/spec"
	"pipe/stdlib"
)

// The data of a run.
//
//   - train: the training part of the train source (train's source field,
//     the source named train, or the only source), opened with OpenSplit.
//   - val, evaluated after every epoch with train's metrics: the train
//     source's validation part when it has a split, else the evaluate
//     source when there is one.
//   - eval, evaluated at the end with evaluate's metrics (train's when it
//     gives none): the evaluate block's source; its validation part when
//     it is the train source. Without an evaluate block the last epoch's
//     validation is the final result.
//
// Every source other than the train source is opened with the train
// source's normalisation (dataset.WithNorm), so it is scaled the same way.
type runData struct {
	trainSrc *spec.Source
	split    *dataset.Split
	train    dataset.Dataset

	val      dataset.Dataset
	valName  string
	valPart  string
	evalDS   dataset.Dataset
	evalName string
	evalPart string
	// evalSet says the final evaluation is its own pass (an evaluate
	// block); evalMetrics are its metrics.
	evalSet     bool
	evalMetrics []string

	opened []dataset.Dataset
	norm   *dataset.Norm

	// The regression target (run_target.go): targetMode is how it is
	// scaled (standard or none), scaling the numbers when standard, and
	// targetMean its training mean (the baseline's prediction; nil when
	// unknown).
	targetMode string
	scaling    *TargetScaling
	targetMean []float64
}

func (d *runData) close() {
	for _, ds := range d.opened {
		_ = ds.Close()
	}
	d.opened = nil
}

// sourceErr turns an error opening or reading a source into a diagnostic.
func (r *runner) sourceErr(b *spec.Source, err error) {
	r.diags = append(r.diags, SourceDiagnostic(b, err))
}

// SourceDiagnostic is the error of a source that cannot be read: the
// run's, and pipe plan's for the same fault (workflow), so that both say
// it in the same words at the same place.
func SourceDiagnostic(b *spec.Source, err error) *diag.Diagnostic {
	at := b.At.Label()
	var se *dataset.SourceError
	if errors.As(err, &se) {
		sub := se.Subject
		at, err = &sub, se.Err
	}
	return &diag.Diagnostic{Severity: diag.Error, Code: CodeData, Summary: fmt.Sprintf("cannot read source %s", b.Name),
		Detail: err.Error(), Subject: at}
}

// dataOptions are the options every source opens with.
func (r *runner) dataOptions(b *spec.Source) []dataset.Option {
	opts := []dataset.Option{dataset.WithBase(r.rc.base), dataset.WithSeed(r.set.fileSeed)}
	return append(opts, ModelOptions(b, r.graph.Input)...)
}

// ModelOptions are the options source b opens with for a model whose
// sample is input: a grayscale model reading an images source that does
// not say its channels reads luminance. pipe plan probes the source
// with them too.
func ModelOptions(b *spec.Source, input []int64) []dataset.Option {
	if b.Images != nil && b.Images.Channels == nil && len(input) == 3 && input[0] == 1 {
		return []dataset.Option{dataset.WithChannels(1)}
	}
	return nil
}

// open opens a source other than the train source, with the train
// source's normalisation.
func (r *runner) open(b *spec.Source) (dataset.Dataset, bool) {
	opts := r.dataOptions(b)
	if r.data.norm != nil {
		opts = append(opts, dataset.WithNorm(*r.data.norm))
	}
	ds, err := dataset.Open(b, opts...)
	if err != nil {
		r.sourceErr(b, err)
		return nil, false
	}
	r.data.opened = append(r.data.opened, ds)
	r.noteSkipped(b, ds)
	return ds, true
}

// noteSkipped warns, at the source's strict field, about the files a
// source left out (an images source with strict false): they are counted
// where the user will see them, not dropped in silence.
func (r *runner) noteSkipped(b *spec.Source, ds dataset.Dataset) {
	s, ok := ds.(dataset.Skipper)
	if !ok || s.Skipped() == 0 {
		return
	}
	files := s.SkippedFiles()
	const show = 5
	list := files
	more := ""
	if len(list) > show {
		list, more = list[:show], fmt.Sprintf("\n(and %d more)", len(files)-show)
	}
	at := b.At.Field("strict")
	r.warnf(at, CodeData, fmt.Sprintf("source %s skipped %d unreadable %s", b.Name, len(files), plural(len(files), "file", "files")),
		"strict false left these out of the data:\n%s%s\nFix or remove them, or write strict true to stop at the first.", strings.Join(list, "\n"), more)
	r.log.Info("files skipped", "source", b.Name, "skipped", len(files))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// openData opens the train, validation and evaluation data and checks
// them against the model.
func (r *runner) openData() bool {
	d := &r.data
	train := r.spec.Train
	var trainAt *spec.Where
	if train != nil {
		trainAt = &train.At
	}
	d.trainSrc = r.spec.TrainSource()
	if d.trainSrc == nil {
		at := trainAt.Field("source")
		if train != nil && train.Source != "" {
			r.errorf(at, CodeData, "no such source", "train reads source %s, but the file declares no source of that name.", train.Source)
		} else {
			r.errorf(at, CodeData, "which source to train on",
				"The file declares %d sources and none is named train; say which one train reads: source NAME.", len(r.spec.Sources))
		}
		return false
	}
	sp, err := dataset.OpenSplit(d.trainSrc, r.dataOptions(d.trainSrc)...)
	if err != nil {
		r.sourceErr(d.trainSrc, err)
		return false
	}
	d.split = sp
	d.opened = append(d.opened, sp.All)
	r.noteSkipped(d.trainSrc, sp.All)
	d.train = sp.Train
	if w := r.rc.wrapTrain; w != nil {
		d.train = w(d.train)
	}
	if n, ok := sp.All.(dataset.Normalized); ok {
		if nm := n.Norm(); len(nm.Mean) > 0 {
			d.norm = &nm
		}
	}
	ok := r.checkInput(d.train, d.trainSrc) && r.checkTargets(d.train, d.trainSrc)
	if !ok {
		return false
	}
	r.setupTarget(sp.All)
	if s := d.scaling; s != nil {
		r.log.Info("targets standardised for training", "source", d.trainSrc.Name, "scaling", s.String())
	}
	if rs, ok := sp.All.(dataset.Raster); ok && rs.Straddling() > 0 {
		r.log.Info("split by blocks", "source", d.trainSrc.Name, "train_tiles", sp.Train.Len(), "val_tiles", sp.Val.Len(), "straddling", rs.Straddling())
	}
	if rs, ok := sp.All.(dataset.Raster); ok && rs.Dropped() > 0 {
		kept := rs.Len()
		r.warnf(d.trainSrc.At.Field("target"), CodeData, fmt.Sprintf("source %s uses %d of its %d tiles", d.trainSrc.Name, kept, kept+rs.Dropped()),
			"%d tiles have no valid target pixel (the target covers %.0f%% of the scene), so they are left out of training and validation. Give a target raster that covers the scene, or a smaller tile, to use more of it.",
			rs.Dropped(), 100*rs.Coverage())
	}
	if d.train.Len() == 0 {
		r.errorf(d.trainSrc.At.Label(), CodeData, "no training samples", "source %s holds no samples to train on.", d.trainSrc.Name)
		return false
	}

	if !r.checkMetrics(r.set.metrics, trainAt) {
		return false
	}

	// Final evaluation.
	if ev := r.spec.Evaluate; ev != nil {
		d.evalSet = true
		d.evalMetrics = r.set.metrics
		if ev.At.Has("metrics") {
			d.evalMetrics = append([]string(nil), ev.Metrics...)
		}
		b := d.trainSrc
		if ev.Source != "" {
			b = r.spec.Source(ev.Source)
			if b == nil {
				r.errorf(ev.At.Field("source"), CodeData, "no such source", "evaluate reads source %s, but the file declares no source of that name.", ev.Source)
				return false
			}
		}
		d.evalName = b.Name
		switch {
		case b == d.trainSrc && sp.Val != nil:
			d.evalDS, d.evalPart = sp.Val, "validation split"
		case b == d.trainSrc:
			d.evalDS, d.evalPart = sp.All, "all"
			r.warnf(ev.At.Field("source"), CodeEvalOnTrain, "evaluating on the training data",
				"evaluate reads source %s, which train also reads and which has no split: the scores measure the training samples, not unseen ones. Add split 0.9 to the source, or evaluate on another source.", b.Name)
		default:
			ds, ok := r.open(b)
			if !ok {
				return false
			}
			if !r.checkInput(ds, b) || !r.checkTargets(ds, b) {
				return false
			}
			d.evalDS, d.evalPart = ds, "all"
		}
		if ev.At.Has("metrics") && !r.checkMetrics(d.evalMetrics, &ev.At) {
			return false
		}
	}
	// Per-epoch validation.
	switch {
	case sp.Val != nil:
		d.val, d.valName, d.valPart = sp.Val, d.trainSrc.Name, "validation split"
	case d.evalDS != nil:
		d.val, d.valName, d.valPart = d.evalDS, d.evalName, d.evalPart
		if d.evalName != d.trainSrc.Name && r.set.ckptMode != "none" {
			r.warnf(r.spec.Evaluate.At.Field("source"), CodeEvalLeak, fmt.Sprintf("source %s is also the per-epoch validation", d.evalName),
				"Source %s has no split, so the evaluate block's source %s is measured after every epoch, and best.ckpt is the epoch that scored best on it: the test set chooses that model, and its scores on %s flatter it (the final scores here are the last epoch's). Add split 0.9 to source %s to validate on held-out training data, and keep %s for the end.",
				d.trainSrc.Name, d.evalName, d.evalName, d.trainSrc.Name, d.evalName)
		}
	default:
		if len(r.set.metrics) > 0 {
			r.warnf(trainAt.Field("metrics"), CodeMetric, "no data to measure the metrics on",
				"Source %s has no split and the file has no evaluate block, so nothing is held out: the metrics are not measured. Add split 0.9 to the source, or an evaluate block.",
				d.trainSrc.Name)
		}
	}
	return true
}

// checkInput compares the samples' shape with the model's input.
func (r *runner) checkInput(ds dataset.Dataset, b *spec.Source) bool {
	d := InputDiagnostic(b, ds.XShape(), r.mspec, r.graph.Input)
	if d == nil {
		return true
	}
	r.diags = append(r.diags, d)
	return false
}

// InputDiagnostic is the error of source b's samples, of shape xs, fed
// to model m, which takes in; nil when they match. The run gives it on
// opening the source, pipe plan from the source's headers
// (dataset.SampleShape).
func InputDiagnostic(b *spec.Source, xs []int64, m *spec.Model, in []int64) *diag.Diagnostic {
	if slices.Equal(xs, in) {
		return nil
	}
	at := rangeOf(m.InputRange)
	if at == nil {
		at = rangeOf(m.NameRange)
	}
	hint := fmt.Sprintf("Write input %s in model %s, or change the source.", shapeString(xs), m.Name)
	if b.Kind == spec.KindImages && len(xs) == 3 && len(in) == 3 && xs[1] == in[1] && xs[2] == in[2] {
		hint = fmt.Sprintf("Write channels %d in source %s, or input %s in the model.", in[0], b.Name, shapeString(xs))
	}
	if k := b.Kind; (k == spec.KindVolume || k == spec.KindZarr) && len(xs) == 4 && len(in) == 4 && xs[0] == in[0] {
		hint = fmt.Sprintf("Write window [%d, %d, %d] in source %s, or input %s in the model.", in[1], in[2], in[3], b.Name, shapeString(xs))
	}
	if b.Kind == spec.KindGeoTIFF && len(xs) == 3 && len(in) == 3 && xs[0] == in[0] {
		hint = fmt.Sprintf("Write tile %dx%d in source %s, or input %s in the model.", in[1], in[2], b.Name, shapeString(xs))
	}
	return &diag.Diagnostic{Severity: diag.Error, Code: CodeShape, Summary: "the model's input does not match the data",
		Detail: fmt.Sprintf("Source %s (line %d) gives samples of shape %s; model %s takes %s. %s",
			b.Name, b.At.KindRange.Start.Line, shapeString(xs), m.Name, shapeString(in), hint),
		Subject: at}
}

// checkTargets compares the targets with the loss and the model's output.
func (r *runner) checkTargets(ds dataset.Dataset, b *spec.Source) bool {
	y, out, classes := ds.YShape(), r.graph.OutShape(), ds.Classes()
	loss := r.cfg.Loss.Kind
	at := b.At.Label()
	fail := func(format string, args ...any) bool {
		r.errorf(at, CodeShape, fmt.Sprintf("the targets of source %s do not fit loss %s", b.Name, loss), format, args...)
		return false
	}
	ny, no := numel(y), numel(out)
	if ny == 0 {
		return fail("Source %s has no targets (a geotiff without a target raster): a model can predict on it, but not train or be evaluated on it. Give it a target, or use it only in predict.", b.Name)
	}
	k := int64(1)
	if len(out) > 0 {
		k = out[0]
	}
	switch loss {
	case "cross_entropy":
		if k < 2 {
			if classes == 0 {
				return fail("cross_entropy needs class labels and a score per class; source %s gives numeric targets and model %s outputs %s. Use loss mse (or mae) for a regression.",
					b.Name, r.mspec.Name, shapeString(out))
			}
			if len(out) == 3 {
				return fail("cross_entropy over one output channel is always 0. For masks of 0 and 1 use loss bce or dice, or end the model with conv %d k1 (a score per class).", max(classes, 2))
			}
			return fail("cross_entropy over a single output is always 0. End the model with dense %d (a score per class), or use loss bce for a binary target.", max(classes, 2))
		}
		switch {
		case len(y) == 0 && len(out) == 1:
			if classes == 0 {
				return fail("cross_entropy needs class labels, but source %s gives numeric targets. Use loss mse (or mae) for a regression.", b.Name)
			}
			if int64(classes) > k {
				if over := labelsOver(ds, k); over != "" {
					return fail("Source %s has labels the model cannot score: model %s outputs %d scores (classes 0 to %d), and %s. Fix those labels in the data; or, if there really are %d classes, end the model with dense %d.",
						b.Name, r.mspec.Name, k, k-1, over, classes, classes)
				}
				return fail("Source %s has %d classes but model %s outputs %d scores (%s). End the model with dense %d.",
					b.Name, classes, r.mspec.Name, k, shapeString(out), classes)
			}
			if int64(classes) < k {
				r.warnf(at, CodeShape, "more outputs than classes",
					"Source %s has %d classes and model %s outputs %d scores; the extra %d are never a target. End the model with dense %d.",
					b.Name, classes, r.mspec.Name, k, k-int64(classes), classes)
			}
			return true
		case slices.Equal(y, out):
			return true // probabilities per output element
		case len(y) == 3 && y[0] == 1 && len(out) == 3 && slices.Equal(y[1:], out[1:]):
			if classes > 0 && int64(classes) > k {
				return fail("Source %s has %d classes but model %s outputs %d channels.", b.Name, classes, r.mspec.Name, k)
			}
			return true
		case len(y) == 0:
			return fail("Source %s gives one class label per sample, but model %s outputs %s per sample. End the model with gap or flatten and dense %d.",
				b.Name, r.mspec.Name, shapeString(out), max(classes, 2))
		}
		return fail("Source %s gives targets of shape %s; model %s outputs %s. cross_entropy needs one class index per output position or one value per output element.",
			b.Name, shapeString(y), r.mspec.Name, shapeString(out))
	case "bce", "dice":
		if slices.Equal(y, out) || (len(y) == 0 && no == 1 && classes <= 2) || (ny == no && len(y) == 1) {
			return true
		}
		return fail("Source %s gives targets of shape %s; model %s outputs %s. %s needs a target per output element.",
			b.Name, shapeString(y), r.mspec.Name, shapeString(out), loss)
	default: // mse, mae
		if ny == no {
			return true
		}
		return fail("Source %s gives targets of shape %s (%d values); model %s outputs %s (%d values). %s compares them element by element.",
			b.Name, shapeString(y), ny, r.mspec.Name, shapeString(out), no, loss)
	}
}

// task is how metrics read the model's outputs.
func (r *runner) task(ds dataset.Dataset) metric.Task {
	t := metric.Task{OutShape: r.graph.OutShape(), YShape: ds.YShape()}
	switch r.cfg.Loss.Kind {
	case "cross_entropy":
		t.Kind = metric.Classes
		if r.lastOp() == "sigmoid" {
			t.Threshold = 0.5
		}
	case "bce", "dice":
		t.Kind = metric.Binary
		if r.lastOp() == "sigmoid" {
			t.Threshold = 0.5
		}
	default:
		t.Kind = metric.Regression
	}
	return t
}

func (r *runner) lastOp() string {
	if n := r.graph.Node(r.graph.Output); n != nil {
		return n.Op
	}
	return ""
}

// checkMetrics refuses metrics that do not fit the task, at the metrics
// field of block b.
func (r *runner) checkMetrics(names []string, at *spec.Where) bool {
	if len(names) == 0 {
		return true
	}
	t := r.task(r.data.train)
	ok := true
	for _, n := range names {
		if err := t.Fits(n); err != nil {
			r.errorf(at.Field("metrics"), CodeMetric, fmt.Sprintf("metric %s does not fit this model", n), "%v.", err)
			ok = false
		}
	}
	return ok
}

func numel(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

func shapeString(s []int64) string {
	b := []byte{'['}
	for i, d := range s {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%d", d)
	}
	return string(append(b, ']'))
}

// nodeNamed finds a graph node by name; a fused description ("fused
// conv1+batchnorm1+relu1") finds its first node.
func nodeNamed(g *stdlib.Graph, name string) *stdlib.Node {
	if g == nil {
		return nil
	}
	if len(name) > 6 && name[:6] == "fused " {
		name = name[6:]
		for i := range len(name) {
			if name[i] == '+' {
				name = name[:i]
				break
			}
		}
	}
	for _, n := range g.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// labelsOver lists a dataset's labels of k or more with their counts, ""
// when it cannot tell.
func labelsOver(ds dataset.Dataset, k int64) string {
	root, _ := dataset.Root(ds, 0)
	lc, ok := root.(dataset.LabelCounter)
	if !ok {
		return ""
	}
	var parts []string
	total := 0
	for c, n := range lc.LabelCounts() {
		if int64(c) >= k && n > 0 {
			total++
			if len(parts) < 8 {
				parts = append(parts, fmt.Sprintf("%d (%d %s)", c, n, plural(n, "sample", "samples")))
			}
		}
	}
	if total == 0 {
		return ""
	}
	if total > len(parts) {
		parts = append(parts, fmt.Sprintf("%d more", total-len(parts)))
	}
	what := "label"
	if total > 1 {
		what = "labels"
	}
	return fmt.Sprintf("the data holds %s %s", what, strings.Join(parts, ", "))
}
