package sweep

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// LockFile is the sweep lock's file in a sweep's folder. A pipe sweep
// holds an exclusive flock on it while it runs (the kernel lets it go
// when the process ends, however it ends) and writes its pid, host, file
// and start into it: two sweeps in one folder would launch the same
// trials into the same checkpoint folders and overwrite each other's
// sweep.json. It is the run lock's scheme (run/run_lock.go) for a sweep.
const LockFile = ".pipe-sweep.lock"

// ErrLocked is wrapped by the error of a folder another sweep holds.
var ErrLocked = errors.New("another pipe sweep is running this sweep")

// A Lock is a held sweep lock.
type Lock struct{ f *os.File }

// TryLock takes dir's sweep lock for a sweep of file, at once or not at
// all: when another process holds it, the error wraps ErrLocked and
// names that process as its lock file does (pid, host, start).
func TryLock(dir, file string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, Holder(dir))
		}
		return nil, err
	}
	host, _ := os.Hostname()
	abs, _ := filepath.Abs(file)
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d\nhost %s\nfile %s\nstarted %s\n", os.Getpid(), host, abs, time.Now().UTC().Format(time.RFC3339))), 0)
	return &Lock{f: f}, nil
}

// Holder says who holds dir's sweep lock, from its file: "pid 12, host
// h, file …, started …".
func Holder(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, LockFile))
	who := strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", ", ")
	if who == "" {
		return "a process that has not written its pid yet"
	}
	return who
}

// Release lets the folder go; the file stays, empty.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}
