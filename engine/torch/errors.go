package torch

import (
	"errors"
	"fmt"
	osexec "os/exec"
	"strings"
	"syscall"

	"pipe/engine"
)

// StartError says why a worker could not start: no such Python, a Python
// without torch, a torch too old, or a process that died on the way.
type StartError struct {
	// Python is the interpreter tried, as given.
	Python string
	Reason string
	Err    error
	Stderr string
	// NoTorch and OldTorch say the Python runs but its torch is missing
	// or older than MinTorch.
	NoTorch, OldTorch bool
	// Killed says a signal from outside ended the worker before it was
	// ready (SIGKILL, SIGTERM, SIGINT, SIGHUP): not the install's fault.
	// OOM says the kernel's OOM killer killed a process of pipe's cgroup
	// meanwhile (its memory.events oom_kill count rose).
	Killed, OOM bool
}

func (e *StartError) Error() string {
	var b strings.Builder
	if e.Killed {
		fmt.Fprintf(&b, "the torch engine's worker (Python %q) %s (%v)", e.Python, e.Reason, e.Err)
		if e.OOM {
			b.WriteString(": the kernel's OOM killer ended it, as memory ran out; free memory (fewer workers, a smaller max_batch, other processes), then start again")
		} else {
			b.WriteString(": a signal from outside ended it, not a fault of the Python install (the kernel's OOM killer when memory runs out, kill, or a job scheduler's limit; dmesg or the system journal says which)")
		}
		if s := lastLines(e.Stderr, 8); s != "" {
			b.WriteString("; its last lines of stderr:\n" + s)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "the torch engine's Python %q %s", e.Python, e.Reason)
	if e.Err != nil {
		fmt.Fprintf(&b, " (%v)", e.Err)
	}
	b.WriteString("; point pipe at a Python with PyTorch 1.13 or later with --python PATH or the PIPE_PYTHON variable")
	if !e.NoTorch && !e.OldTorch {
		b.WriteString(", or plan for the native engine with --engine native")
	}
	if s := lastLines(e.Stderr, 8); s != "" {
		b.WriteString("; its last lines of stderr:\n" + s)
	}
	return b.String()
}

func (e *StartError) Unwrap() error { return e.Err }

// exitedEarly is the StartError of a worker that exited, with err, before
// it was ready. A signal sent from outside makes it Killed, and OOM when
// the cgroup's OOM kills rose from oomBefore; a crash (SIGSEGV, SIGILL,
// SIGABRT) or an exit status is the Python's, as before.
func exitedEarly(python string, err error, stderr string, oomBefore int64) *StartError {
	e := &StartError{Python: python, Reason: "exited before it was ready", Err: err, Stderr: stderr}
	var ee *osexec.ExitError
	if !errors.As(err, &ee) {
		return e
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return e
	}
	switch ws.Signal() {
	case syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
		e.Killed, e.Reason = true, "was killed before it was ready"
		if n := oomKills(); oomBefore >= 0 && n > oomBefore {
			e.OOM = true
		}
	}
	return e
}

// WorkerError says a worker died while it worked.
type WorkerError struct {
	Rank, PID int
	Err       error
	Stderr    string
}

func (e *WorkerError) Error() string {
	s := fmt.Sprintf("the torch worker of rank %d (pid %d) died: %v", e.Rank, e.PID, e.Err)
	if t := lastLines(e.Stderr, 12); t != "" {
		s += "; its last lines of stderr:\n" + t
	}
	return s
}

func (e *WorkerError) Unwrap() error { return e.Err }

// Is makes a dead worker engine.ErrWorkerLost.
func (e *WorkerError) Is(target error) bool { return target == engine.ErrWorkerLost }

func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// replyErr turns a failed reply into the error package engine names for
// it (NonFiniteError, OutOfMemoryError, ...), which the run loop reads.
func replyErr(r response, rank int) error {
	if r.OK {
		return nil
	}
	switch r.Kind {
	case kindNonFinite:
		e := &engine.NonFiniteError{Step: r.Step, MicroStep: r.MicroStep, Node: r.Node, Op: r.Op, Param: r.Param, Input: r.Input}
		if r.Loss != nil {
			e.Loss = float64(*r.Loss)
		}
		return e
	case kindOOM:
		e := &engine.OutOfMemoryError{Phase: r.Phase, Node: r.Node, Detail: r.Error, Rank: rank}
		if m := r.Memory; m != nil {
			e.Device, e.MaxAllocated, e.MaxReserved, e.Used, e.Total = m.Device, m.MaxAllocated, m.MaxReserved, m.Used, m.Total
		}
		return e
	case kindUnsupported:
		return fmt.Errorf("%w: %s", engine.ErrUnsupported, r.Error)
	case kindBadBatch:
		return fmt.Errorf("%w: %s", engine.ErrBadBatch, r.Error)
	}
	msg := r.Error
	if msg == "" {
		msg = "failed without a message"
	}
	if collectiveTimedOut(msg) {
		// The cause is another rank, and the traceback says nothing of
		// which: the queue names a local rank that is stopped.
		return &peerLostError{err: fmt.Errorf("torch worker (rank %d): a collective timed out (%s): a peer rank stalled or cannot be reached",
			rank, firstLine(msg))}
	}
	err := fmt.Errorf("torch worker (rank %d): %s", rank, msg)
	if peerLost(msg) {
		err = &peerLostError{err: err}
	}
	if r.Trace != "" {
		err = fmt.Errorf("%w\n%s", err, strings.TrimRight(r.Trace, "\n"))
	}
	return err
}

// IsStartError says err is a worker that could not start.
func IsStartError(err error) bool {
	var s *StartError
	return errors.As(err, &s)
}

// peerLostSigns are what gloo and NCCL say on a rank whose peer went away
// (killed, its machine lost, its connection cut).
var peerLostSigns = []string{"Connection reset by peer", "Connection closed by peer", "Broken pipe",
	"remote process exited", "NCCL communicator was aborted", "Socket Timeout"}

func peerLost(msg string) bool {
	for _, s := range peerLostSigns {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// peerLostError is a rank's failure because a peer went away: it is
// engine.ErrWorkerLost, so the advice is to resume as is.
type peerLostError struct{ err error }

func (e *peerLostError) Error() string        { return e.err.Error() }
func (e *peerLostError) Unwrap() error        { return e.err }
func (e *peerLostError) Is(target error) bool { return target == engine.ErrWorkerLost }

// collectiveTimedOut says msg is gloo's or NCCL's collective timeout.
func collectiveTimedOut(msg string) bool {
	return strings.Contains(msg, "Timed out waiting") || strings.Contains(msg, "Watchdog caught collective operation timeout")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
