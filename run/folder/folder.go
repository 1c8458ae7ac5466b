package folder

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// A Folder is a run's folder while the run writes into it: it holds the
// folder's lock, knows whether the folder's checkpoints are an earlier
// run's that the run's first checkpoint replaces (stale), and marks the
// pipeline's latest once the run wrote one. The zero Folder of a Dir is
// a folder given as it is: no latest, no job, no mirror.
type Folder struct {
	// Dir is the folder; Root the pipeline's folder whose latest names
	// Dir once Dir holds a checkpoint ("" for a folder given explicitly,
	// and for the old layout, where latest is not kept).
	Dir, Root string
	// Job is the job the run belongs to; none for a run started by hand.
	Job Job
	// Mirror is the folder's copy in an object store; nil for none.
	Mirror Mirror

	lock *Lock
	// stale: the folder holds an earlier run's checkpoints, which the
	// run's first checkpoint replaces; deferred: Claim left them for
	// Restarted to continue or replace; wrote: the run wrote one.
	stale, deferred, wrote bool
}

// A Mirror is a folder's copy in an object store, as far as replacing
// an earlier run's files needs it.
type Mirror interface {
	// Epochs are the names of the epoch-NNN.ckpt files the copy holds.
	Epochs() ([]string, error)
	// Delete removes the named files from the copy.
	Delete(names ...string) error
}

// Lock takes the folder's run lock for a run of file; the error wraps
// ErrLocked when another run holds it.
func (f *Folder) Lock(file string) error {
	l, err := LockRun(f.Dir, file)
	if err != nil {
		return err
	}
	f.lock = l
	return nil
}

// Release lets the folder's lock go, when the run holds it.
func (f *Folder) Release() { f.lock.Release(); f.lock = nil }

// Claim checks, before a run that does not continue the folder's
// checkpoints trains, whose checkpoints the folder holds: another
// pipeline's (by run's identity) are refused with how they differ; this
// pipeline's earlier run's are stale, replaced, all of them, at the run's
// first checkpoint, so that best.ckpt is never an earlier run's beside
// this one's last.ckpt. stale says so, for the run to warn while there
// is time to stop. With decideLater (a launcher's restart decides,
// after the ranks met) they are neither: Restarted decides.
func (f *Folder) Claim(run Identity, decideLater bool) (stale bool, m *Mismatch) {
	if files, _ := filepath.Glob(filepath.Join(f.Dir, "*.ckpt")); len(files) == 0 {
		return false, nil
	}
	for _, name := range []string{LastCheckpoint, BestCheckpoint} {
		path := filepath.Join(f.Dir, name)
		var ck Identity
		if err := ReadMeta(path, &ck); err != nil {
			continue // missing or unreadable: nothing says whose it is
		}
		if m := run.Differs(path, ck); m != nil {
			return false, m
		}
	}
	if decideLater {
		f.deferred = true
		return false, nil
	}
	f.stale = true
	return true, nil
}

// Restarted decides, for a folder Claim left undecided, what a run does
// with its checkpoints once the world's largest launcher restart count n
// is known: above 0 with a last.ckpt the run continues it (resume);
// otherwise the earlier run's checkpoints are stale, as Claim would have
// said (stale, for the run to warn).
func (f *Folder) Restarted(n int) (resume, stale bool) {
	if n > 0 && FileExists(filepath.Join(f.Dir, LastCheckpoint)) {
		return true, false
	}
	if f.deferred {
		f.stale = true
		return false, true
	}
	return false, false
}

// Stale reports whether the run's first checkpoint replaces an earlier
// run's files.
func (f *Folder) Stale() bool { return f.stale }

// ClearStale removes an earlier run's best.ckpt, epoch files and
// settings from the folder (and its mirror) before the run's first
// checkpoint replaces last.ckpt: stopped between the two, the folder
// holds the earlier run's last.ckpt alone, never a pair of two runs. A
// folder of no job loses its job record too: the job that recorded it no
// longer has its run here. Nothing is stale afterwards, even on error.
func (f *Folder) ClearStale() error {
	f.stale = false
	old, _ := filepath.Glob(filepath.Join(f.Dir, "epoch-*.ckpt"))
	old = append(old, filepath.Join(f.Dir, BestCheckpoint), filepath.Join(f.Dir, SettingsFile))
	if f.Job.ID == "" {
		old = append(old, filepath.Join(f.Dir, JobFile))
	}
	var remoteOld []string
	var err error
	if f.Mirror != nil {
		remoteOld, err = f.Mirror.Epochs()
	}
	for _, path := range old {
		if err == nil {
			if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = rerr
			}
		}
		remoteOld = append(remoteOld, filepath.Base(path))
	}
	if err == nil && f.Mirror != nil {
		err = f.Mirror.Delete(remoteOld...)
	}
	return err
}

// Write writes the folder's file name atomically (WriteFileAtomic) and
// returns its path: a failed write leaves the previous file as it was.
func (f *Folder) Write(name string, write func(io.Writer) error, wrap func(io.Writer) io.Writer) (string, error) {
	path := filepath.Join(f.Dir, name)
	return path, writeFileAtomic(path, write, wrap)
}

// Wrote records that the run wrote its last.ckpt; the first time, it
// points the pipeline's latest at the folder (when it has a Root), so a
// run that wrote nothing never becomes the one to resume or serve.
func (f *Folder) Wrote() error {
	if f.wrote {
		return nil
	}
	f.wrote = true
	if f.Root == "" {
		return nil
	}
	return MarkLatest(f.Root, f.Dir)
}

// Written reports whether the run wrote a checkpoint here.
func (f *Folder) Written() bool { return f.wrote }

// ResumesHere reports whether a resume from at ("" the folder's own
// last.ckpt; else a checkpoint file or a folder) continues the folder's
// own checkpoints: only then are they, best.ckpt among them, the run's.
func (f *Folder) ResumesHere(at string) bool {
	if at == "" {
		return true
	}
	if st, err := os.Stat(at); err != nil || !st.IsDir() {
		at = filepath.Dir(at)
	}
	return SameFolder(at, f.Dir)
}

// ResumeFrom is the checkpoint a resume from at reads: the folder's
// last.ckpt for "", else CheckpointIn(at, last.ckpt).
func (f *Folder) ResumeFrom(at string) string {
	if at == "" {
		return filepath.Join(f.Dir, LastCheckpoint) // the folder's, or the file it would hold
	}
	return CheckpointIn(at, LastCheckpoint)
}

// CheckpointIn is the checkpoint file that path names: path itself, or
// the file name in it when path is a folder (pipe run --resume DIR, pipe
// serve --checkpoint DIR). A path that does not exist is returned as it
// is, for the error that reading it gives.
func CheckpointIn(path, name string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, name)
	}
	return path
}
