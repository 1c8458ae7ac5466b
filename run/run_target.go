package run

import (
	"fmt"
	"slices"

	"pipe/dataset"
	"pipe/run/metric"
)

// Regression targets.
//
// A network learns a regression target best near 0 with unit spread, so
// when the loss is mse or mae and the training source knows its targets'
// statistics (dataset.TargetNormalized, target_normalize standard), the run
// trains on y' = (y − mean_k) / std_k per target channel and maps outputs
// back before it scores or writes them: mae, rmse and predictions are in
// the target's units, losses are standardised. A checkpoint keeps the
// numbers, and every regression evaluation also scores predicting the
// training mean (Evaluation.Baseline).
//
// Derivation: docs/design/target-scaling.md.

// TargetScaling is how a run standardised its regression targets, per
// target channel: the model learnt (y − Mean[k]) / Std[k].
type TargetScaling struct {
	Mean []float64 `json:"mean"`
	Std  []float64 `json:"std"`
}

// Target normalisation modes as checkpoints record them.
const (
	targetStandard = "standard"
	targetRaw      = "none"
)

// setupTarget reads the training source's target statistics: the mean
// for the baseline, and the scaling when the source asks for it and the
// loss is a regression.
func (r *runner) setupTarget(all dataset.Dataset) {
	d := &r.data
	d.targetMode = targetRaw
	if r.task(d.train).Kind != metric.Regression {
		return
	}
	tn, ok := all.(dataset.TargetNormalized)
	if !ok {
		return
	}
	n, standard := tn.TargetNorm()
	if len(n.Mean) == 0 || len(n.Mean) != len(n.Std) {
		return
	}
	d.targetMean = slices.Clone(n.Mean)
	if standard {
		d.targetMode = targetStandard
		d.scaling = &TargetScaling{Mean: slices.Clone(n.Mean), Std: slices.Clone(n.Std)}
	}
}

// adoptTarget makes the run use the target scaling a checkpoint was
// trained with (mode "" is a checkpoint from before targets were scaled:
// raw). It warns when it differs from the data's.
func (r *runner) adoptTarget(path, mode string, mean, std []float64) {
	d := &r.data
	if mode == "" {
		mode = targetRaw
	}
	if r.task(d.train).Kind != metric.Regression {
		return
	}
	var ck *TargetScaling
	if mode == targetStandard && len(mean) > 0 && len(mean) == len(std) {
		ck = &TargetScaling{Mean: mean, Std: std}
	}
	if same(ck, d.scaling) {
		return
	}
	describe := func(s *TargetScaling) string {
		if s == nil {
			return "raw targets"
		}
		return "targets standardised with " + s.String()
	}
	r.warnf(nil, CodeResume, "the target's scaling changed since the checkpoint",
		"%s was trained on %s; the data now gives %s (a changed target raster, split or target_normalize). The run keeps the checkpoint's, so that the model's outputs are read in the units it learnt.",
		path, describe(ck), describe(d.scaling))
	d.scaling = ck
	if ck == nil {
		d.targetMode = targetRaw
	} else {
		d.targetMode = targetStandard
	}
}

func same(a, b *TargetScaling) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Mean, b.Mean) && slices.Equal(a.Std, b.Std)
}

// String renders the scaling: "mean 24.1 std 20.3" per channel.
func (s *TargetScaling) String() string {
	if s == nil {
		return "none"
	}
	out := ""
	for k := range s.Mean {
		if k > 0 {
			out += "; "
		}
		out += fmt.Sprintf("mean %.4g std %.4g", s.Mean[k], s.Std[k])
	}
	return out
}

// channelOf returns, for element j of a sample of per elements with k
// channels, its channel (0 when the elements do not divide evenly).
func channelOf(j, per, k int) int {
	if k <= 1 || per%k != 0 {
		return 0
	}
	return j / (per / k)
}

// standardise scales n samples of per target values in place to the
// standardised units the model learns.
func (s *TargetScaling) standardise(y []float32, n, per int) {
	k := len(s.Mean)
	for i := range n {
		v := y[i*per : (i+1)*per]
		for j := range v {
			c := channelOf(j, per, k)
			v[j] = float32((float64(v[j]) - s.Mean[c]) / s.Std[c])
		}
	}
}

// restore maps n samples of per model outputs in place back to the
// target's units.
func (s *TargetScaling) restore(out []float32, n, per int) {
	k := len(s.Mean)
	for i := range n {
		v := out[i*per : (i+1)*per]
		for j := range v {
			c := channelOf(j, per, k)
			v[j] = float32(float64(v[j])*s.Std[c] + s.Mean[c])
		}
	}
}

// fillMean fills n samples of per values with the training mean of their
// channel: the baseline's prediction.
func fillMean(v []float32, n, per int, mean []float64) {
	for i := range n {
		for j := range per {
			v[i*per+j] = float32(mean[channelOf(j, per, len(mean))])
		}
	}
}
