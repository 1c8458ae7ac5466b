package run

import "pipe/run/folder"

// WithSettings has the run record s in its folder's folder.SettingsFile, before
// its first checkpoint there (rank 0 alone), so that the folder's
// checkpoints and its settings are always one run's.
func WithSettings(s folder.Settings) Option { return func(c *runConfig) { c.settings = &s } }

// recordSettings writes the run's Settings into its folder unless the
// folder records them already; false, with a diagnostic, when it cannot.
func (r *runner) recordSettings() bool {
	s := r.rc.settings
	if s == nil {
		return true
	}
	err := folder.RecordSettings(r.set.ckptDir, s)
	if err != nil {
		r.res.Status = StatusFailed
		r.errorf(nil, CodeCheckpoint, "cannot record the run's settings",
			"%s. A resume reads them to train as this run did, so no checkpoint was written; give a folder that can be written with --checkpoint-dir.", diskFull(err))
		return false
	}
	return true
}
