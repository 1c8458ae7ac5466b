package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"pipe/run/folder"
	"syscall"

	"pipe/diag"
)

// CheckWritable reports whether a file can be written at path, as
// folder.WriteFileAtomic writes it: its folder exists or can be made, a file can
// be created in it, and path is not itself a folder. It creates the
// folder and removes the file it tried. A run calls it for its checkpoint
// folder and its predictions before it trains, so that a read-only or
// missing output folder fails before any compute is spent rather than
// after it.
func CheckWritable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a folder; give a file name", path)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.probe")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the probe's own name would only puzzle
		}
		return fmt.Errorf("cannot create a file in %s: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// diskFull says "the disk is full" for an error that means it.
func diskFull(err error) string {
	if errors.Is(err, syscall.ENOSPC) {
		return "the disk is full (" + err.Error() + ")"
	}
	return err.Error()
}

// preflight checks, before training, that the files the run will write
// can be written: the checkpoints and the predictions.
func (r *runner) preflight() bool {
	ok := true
	// Rank 0 alone writes checkpoints; another rank makes no folder.
	if !r.rc.skipTrain && r.set.ckptMode != "none" && r.rc.nodeRank == 0 {
		path := filepath.Join(r.set.ckptDir, folder.LastCheckpoint)
		if err := CheckWritable(path); err != nil {
			var at *diag.Range // --checkpoint-dir or the default folder: no line says it
			if train := r.spec.Train; r.rc.ckptDir == "" && train != nil && train.At.Has("checkpoint_dir") {
				at = train.At.Field("checkpoint_dir")
			}
			r.errorf(at, CodeCheckpoint, "cannot write checkpoints to "+r.set.ckptDir,
				"%s. Nothing was trained. Give a folder that can be written with --checkpoint-dir, or write save none in train.", diskFull(err))
			ok = false
		} else {
			err := r.folder.Lock(r.p.File)
			switch {
			case errors.Is(err, folder.ErrLocked):
				r.errorf(nil, CodeLocked, "another run is using "+r.set.ckptDir,
					"%v. Two runs in one folder would replace each other's checkpoints. Nothing was trained: wait for that run to end, or give this one its own folder with --checkpoint-dir.", err)
				ok = false
			case err != nil:
				r.errorf(nil, CodeCheckpoint, "cannot lock "+r.set.ckptDir, "%v. Nothing was trained.", err)
				ok = false
			default:
				ok = r.ownJob() && r.claim() && ok
			}
		}
	}
	if pb := r.spec.Predict; pb != nil {
		if pb.At.Has("write") {
			path := resolve(r.rc.base, pb.Write)
			if isZarrPath(path) {
				path = filepath.Join(path, ".zarray") // a Zarr array is a folder of files
			}
			if err := CheckWritable(path); err != nil {
				r.errorf(pb.At.Field("write"), CodePredict, "cannot write the predictions",
					"%s. Nothing was trained. Give predict's write a path that can be written.", diskFull(err))
				ok = false
			}
		}
	}
	return ok
}
