package folder

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Run folders. Every run writes into a folder of its own,
// out/PIPELINE/runs/STAMP, so that a new run never replaces an earlier
// one's last.ckpt nor sits beside its best.ckpt. out/PIPELINE/latest names
// the newest run that wrote a checkpoint. Out/PIPELINE/checkpoints, the
// layout before run folders, is read while no latest exists.

const (
	// RunsFolder holds a pipeline's run folders, in out/PIPELINE.
	RunsFolder = "runs"
	// LatestName names the newest run's folder, in out/PIPELINE: a
	// symbolic link, or where none can be made a file holding its path.
	LatestName = "latest"
	// LegacyFolder is the one checkpoint folder of the layout before runs.
	LegacyFolder = "checkpoints"
)

// ErrNoRun is wrapped by the error of a --resume that finds no run.
var ErrNoRun = errors.New("no run to resume")

// LatestRun is the folder of root's latest run: what root/latest names,
// else (legacy true) root/checkpoints when it holds a checkpoint, as the
// layout before run folders left it. With neither the error wraps ErrNoRun.
func LatestRun(root string) (dir string, legacy bool, err error) {
	latest := filepath.Join(root, LatestName)
	st, err := os.Lstat(latest)
	switch {
	case err == nil:
		var target string
		if st.Mode()&fs.ModeSymlink != 0 {
			target, err = os.Readlink(latest)
		} else {
			var b []byte
			b, err = os.ReadFile(latest)
			target = strings.TrimSpace(string(b))
		}
		if err != nil {
			return "", false, fmt.Errorf("reading %s: %w", latest, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(root, target)
		}
		if st, err := os.Stat(target); err != nil || !st.IsDir() {
			return "", false, fmt.Errorf("%s names %s, which is not a folder (was it removed?): %w", latest, target, ErrNoRun)
		}
		return target, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", false, err
	}
	old := filepath.Join(root, LegacyFolder)
	for _, name := range []string{LastCheckpoint, BestCheckpoint} {
		if FileExists(filepath.Join(old, name)) {
			return old, true, nil
		}
	}
	return "", false, fmt.Errorf("%s has no %s and no %s folder: %w", root, LatestName, LegacyFolder, ErrNoRun)
}

// MarkLatest points root/latest at dir, replacing what it named at once
// (a rename): a relative symbolic link, so that the tree can move and a
// shell can cd into it, or where the file system makes none (Windows
// without the privilege) a file holding the path.
func MarkLatest(root, dir string) error {
	target, err := filepath.Rel(root, dir)
	if err != nil {
		target = dir
	}
	latest := filepath.Join(root, LatestName)
	tmp := filepath.Join(root, fmt.Sprintf(".%s.%d.tmp", LatestName, os.Getpid()))
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err == nil {
		if err := os.Rename(tmp, latest); err != nil {
			os.Remove(tmp)
			return err
		}
		return nil
	}
	return WriteFileAtomic(latest, func(w io.Writer) error {
		_, err := io.WriteString(w, target+"\n")
		return err
	})
}

// NewStampFolder makes parent/STAMP, STAMP the local time to the
// second, with -2, -3, ... when another of the same second has it: Mkdir
// fails on a folder that exists, so two never get the same one. what
// names them in the error ("runs", "sweeps").
func NewStampFolder(parent string, now time.Time, what string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	stamp := now.Format("20060102-150405")
	for i := 1; i < 1000; i++ {
		name := stamp
		if i > 1 {
			name += "-" + strconv.Itoa(i)
		}
		d := filepath.Join(parent, name)
		err := os.Mkdir(d, 0o755)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s: a thousand %s started in the second %s", parent, what, stamp)
}

// FileExists reports whether path is a file.
func FileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// SameFolder reports whether a and b name one folder.
func SameFolder(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if sa, err := os.Stat(a); err == nil {
		if sb, err := os.Stat(b); err == nil {
			return os.SameFile(sa, sb)
		}
	}
	aa, _ := filepath.Abs(a)
	ab, _ := filepath.Abs(b)
	return aa == ab
}
