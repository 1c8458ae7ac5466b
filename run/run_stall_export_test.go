package run

import "pipe/dataset"

// WithTrainWrap wraps the training data once it is opened, so a test can
// make the source slow.
func WithTrainWrap(wrap func(dataset.Dataset) dataset.Dataset) Option {
	return func(c *runConfig) { c.wrapTrain = wrap }
}
