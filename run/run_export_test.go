package run

import (
	"io"

	"pipe/run/folder"
)

// WithCheckpointWriter wraps the writer of every checkpoint file, so a test
// can make it fail as a full disk does.
func WithCheckpointWriter(wrap func(io.Writer) io.Writer) Option {
	return func(c *runConfig) { c.wrapCheckpoint = wrap }
}

// AsOldCheckpoint rewrites the checkpoint at path as pipe wrote it before
// positions were kept in samples: without the epoch's samples.
func AsOldCheckpoint(path string) error {
	meta, st, err := readCheckpoint(path)
	if err != nil {
		return err
	}
	meta.Position.EpochSamples = 0
	return folder.WriteFileAtomic(path, func(w io.Writer) error { return encodeCheckpoint(w, meta, st) })
}
