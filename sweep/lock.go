package sweep

import (
	"errors"
	"fmt"
	"path/filepath"

	"pipe/run/folder"
)

// LockFile is the sweep lock's file in a sweep's folder. A pipe sweep
// holds it while it runs (folder.TryLock, the run lock's scheme, with the
// host in its record): two sweeps in one folder would launch the same
// trials into the same checkpoint folders and overwrite each other's
// sweep.json.
const LockFile = ".pipe-sweep.lock"

// ErrLocked is wrapped by the error of a folder another sweep holds.
var ErrLocked = errors.New("another pipe sweep is running this sweep")

// A Lock is a held sweep lock.
type Lock = folder.Lock

// TryLock takes dir's sweep lock for a sweep of file, at once or not at
// all: when another process holds it, the error wraps ErrLocked and
// names that process as its lock file does (pid, host, start).
func TryLock(dir, file string) (*Lock, error) {
	l, err := folder.TryLock(filepath.Join(dir, LockFile), folder.Record(file, true))
	if errors.Is(err, folder.ErrHeld) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, Holder(dir))
	}
	return l, err
}

// Holder says who holds dir's sweep lock, from its file: "pid 12, host
// h, file …, started …".
func Holder(dir string) string {
	if who := folder.Holder(filepath.Join(dir, LockFile)); who != "" {
		return who
	}
	return "a process that has not written its pid yet"
}
