package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The run lock. Two runs given the same checkpoint folder (--checkpoint-dir,
// checkpoint_dir, or --resume of the latest run): each would replace the other's
// last.ckpt, and a --resume would continue whichever wrote last. A run
// that writes checkpoints therefore holds an exclusive lock on a file in
// the folder (flock, released by the kernel when the process ends, however
// it ends) and writes its PID, source file and start time into it, so that
// a second run is refused with the first one's PID.

// LockFile is the lock's file name in the checkpoint folder.
const LockFile = ".pipe-run.lock"

// ErrLocked is wrapped by the error of a folder another run holds.
var ErrLocked = errors.New("the checkpoint folder is in use by another run")

// folderLock is a held lock.
type folderLock struct{ f *os.File }

// lockFolder takes the run lock of dir for the run of file.
func lockFolder(dir, file string) (*folderLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "a process that has not written its PID yet"
			}
			return nil, fmt.Errorf("%w: %s (%s)", ErrLocked, dir, strings.ReplaceAll(who, "\n", ", "))
		}
		return nil, err
	}
	abs, _ := filepath.Abs(file)
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d\nfile %s\nstarted %s\n", os.Getpid(), abs, time.Now().UTC().Format(time.RFC3339))), 0)
	return &folderLock{f: f}, nil
}

// folderBusy reports whether another process holds dir's run lock now.
func folderBusy(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR, 0)
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

// release lets the folder go; the file stays, empty of meaning once
// unlocked.
func (l *folderLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}
