package folder

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes path through a temporary file in its folder:
// write fills it, then it is flushed, fsynced, closed, renamed over path
// and the folder fsynced. On any failure the temporary file is removed
// and path is left as it was, so a reader finds the old file or the new
// one, never part of one. A file that path replaces keeps its permission
// bits; a new one is 0644. Checkpoints, records, reports, plots,
// predictions and pipe fmt -w write through it.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	return writeFileAtomic(path, write, nil)
}

// writeFileAtomic is WriteFileAtomic with wrap, when not nil, wrapping
// the file's writer (Folder.Write's callers inject failures in tests).
func writeFileAtomic(path string, write func(io.Writer) error, wrap func(io.Writer) io.Writer) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		mode = st.Mode().Perm()
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp, closed := f.Name(), false
	defer func() {
		if err != nil {
			if !closed {
				f.Close()
			}
			os.Remove(tmp)
		}
	}()
	var w io.Writer = f
	if wrap != nil {
		w = wrap(w)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	closed = true
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp, mode); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
