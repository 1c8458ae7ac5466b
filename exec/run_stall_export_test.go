package exec

import "pipe/exec/data"

// WithTrainWrap wraps the training data once it is opened, so a test can
// make the source slow.
func WithTrainWrap(wrap func(data.Dataset) data.Dataset) Option {
	return func(c *runConfig) { c.wrapTrain = wrap }
}
