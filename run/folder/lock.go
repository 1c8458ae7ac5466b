package folder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The lock. Two runs given the same checkpoint folder (--checkpoint-dir,
// checkpoint_dir, or --resume of the latest run) would each replace the
// other's last.ckpt, and a --resume would continue whichever wrote last;
// two sweeps in one folder would launch the same trials. So the one that
// writes holds an exclusive flock on a file in the folder (released by
// the kernel when the process ends, however it ends: a stale lock file is
// only a file, and the next run takes it) and writes who it is into it,
// so that a second is refused with the first one's pid.

// LockFile is the run lock's file name in a run's folder.
const LockFile = ".pipe-run.lock"

// ErrHeld is wrapped by TryLock's error for a lock another process holds.
var ErrHeld = errors.New("the lock is held by another process")

// ErrLocked is wrapped by the error of a folder another run holds.
var ErrLocked = errors.New("the checkpoint folder is in use by another run")

// A Lock is a held lock.
type Lock struct{ f *os.File }

// TryLock takes the lock file at path, making its folder, at once or not
// at all, and writes record into it: who holds it. When another process
// holds it the error wraps ErrHeld, and Holder reads who.
func TryLock(path, record string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrHeld)
		}
		return nil, err
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(record), 0)
	return &Lock{f: f}, nil
}

// Record is what a lock's file says of its holder: this process's pid,
// the host when host is set, the file it runs and when it started, one a
// line.
func Record(file string, host bool) string {
	abs, _ := filepath.Abs(file)
	var b strings.Builder
	fmt.Fprintf(&b, "pid %d\n", os.Getpid())
	if host {
		h, _ := os.Hostname()
		fmt.Fprintf(&b, "host %s\n", h)
	}
	fmt.Fprintf(&b, "file %s\nstarted %s\n", abs, time.Now().UTC().Format(time.RFC3339))
	return b.String()
}

// Holder is who holds the lock at path as its file says, on one line
// ("pid 12, file …, started …"); "" when the file says nothing yet.
func Holder(path string) string {
	b, _ := os.ReadFile(path)
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", ", ")
}

// Busy reports whether another process holds the lock at path now.
func Busy(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false // no lock file: nobody has locked it
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// Release lets the lock go; the file stays, empty of meaning once
// unlocked. A nil Lock is none.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// LockRun takes dir's run lock for a run of file. When another run holds
// it the error wraps ErrLocked and names that run as its file does.
func LockRun(dir, file string) (*Lock, error) {
	l, err := TryLock(filepath.Join(dir, LockFile), Record(file, false))
	if errors.Is(err, ErrHeld) {
		who := Holder(filepath.Join(dir, LockFile))
		if who == "" {
			who = "a process that has not written its PID yet"
		}
		return nil, fmt.Errorf("%w: %s (%s)", ErrLocked, dir, who)
	}
	return l, err
}
