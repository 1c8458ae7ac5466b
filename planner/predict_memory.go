package planner

import "fmt"

// WithPredictMemory gives what the file's prediction holds besides the
// model and the sources, as a function of the model's output channels:
// the bytes and what they are (dataset's PredictBytes: the blended
// volume of a volume or zarr source). The CPU backend counts it in the
// process's total with the data.
func WithPredictMemory(f func(outChannels int64) (bytes int64, what string)) Option {
	return func(c *config) { c.predict = f }
}

// predictTerm adds the prediction's buffers to the data term when the
// file predicts, and says so.
func (pl *planner) predictTerm(reasons []string) []string {
	if pl.cfg.predict == nil || pl.sp.Predict == nil {
		return reasons
	}
	k := int64(1)
	if out := pl.graph.OutShape(); len(out) > 0 {
		k = out[0]
	}
	b, what := pl.cfg.predict(k)
	if b <= 0 {
		return reasons
	}
	pl.cost.static.data = add(pl.cost.static.data, b)
	return append(reasons, fmt.Sprintf("prediction %s: %s", FormatBytes(b), what))
}
