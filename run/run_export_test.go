package run

import "io"

// WithCheckpointWriter wraps the writer of every checkpoint file, so a test
// can make it fail as a full disk does.
func WithCheckpointWriter(wrap func(io.Writer) io.Writer) Option {
	return func(c *runConfig) { c.wrapCheckpoint = wrap }
}
