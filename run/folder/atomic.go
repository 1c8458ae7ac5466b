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
// one, never part of one. wrap, when not nil, wraps the file's writer
// (tests inject failures).
func WriteFileAtomic(path string, write func(io.Writer) error, wrap func(io.Writer) io.Writer) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
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
	if err = os.Chmod(tmp, 0o644); err != nil {
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
