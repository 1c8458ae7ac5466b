package torch

import (
	"fmt"
	"strings"
	"time"

	"pipe/engine"
)

// A rank that waits long for its worker's reply may be waiting on a peer
// that stalled inside a collective: a SIGSTOP, a debugger, a hung machine
// or network. Such a wait is reported every stallReport, and ends at the
// collective's timeout. Once the run is interrupted (Config.Cancel), the
// run loop waits for the step in progress to finish, so a wait on a
// stalled peer is given up instead: at once when a rank of this machine
// is stopped, else once it has lasted its patience
// (docs/design/scale-out.md, "A stalled peer").

// stallReport is how often a rank waiting long for a reply says so.
var stallReport = 30 * time.Second

// stallTick is how often a waiting rank looks at its wait: a sixth of
// stallReport, so that the first report comes at most that late. The
// ticker is the model's, not the wait's; ticking at stallReport itself,
// a wait that began just after a tick was first reported at almost
// twice stallReport (60 s where the docs say 30).
func stallTick() time.Duration { return max(stallReport/6, time.Millisecond) }

// stallDue says whether a wait of waited, next to be reported at next,
// is reported now, and when it is next: at the first multiple of
// stallReport it has passed.
func stallDue(waited, next time.Duration) (bool, time.Duration) {
	if waited < next {
		return false, next
	}
	return true, waited.Truncate(stallReport) + stallReport
}

// ticker is the model's stall ticker, started on first use.
func (m *model) ticker() <-chan time.Time {
	if m.stallTick == nil {
		m.stallTick = time.NewTicker(stallTick())
	}
	return m.stallTick.C
}

// interruptGrace is the least patience of a wait after an interrupt, and
// slowFactor how many times a command's slowest reply so far it is: a
// step that is slow but moving finishes, and its checkpoint is written.
var interruptGrace = 5 * time.Second

const slowFactor = 4

// timed notes how long the reply to s took, as the patience of later
// waits for the same command. A step's first reply warms up (allocator,
// DDP's buckets, torch.compile) and is left out.
func (m *model) timed(s sent, d time.Duration) {
	if s.step == 1 && stepCommand(s.cmd) {
		return
	}
	m.slowest[s.cmd] = max(m.slowest[s.cmd], d)
}

func stepCommand(cmd string) bool { return cmd == "train" || cmd == "train+step" || cmd == "step" }

// giveUp fires when an interrupted wait for w's next reply, begun at
// start, is given up as stalled; nil when it is waited for to the end.
func (m *model) giveUp(w *worker, start time.Time) <-chan time.Time {
	d, ok := m.patience(w.outstanding[0].cmd)
	if !ok {
		return nil
	}
	return time.After(d - time.Since(start))
}

// patience is how long an interrupted wait for the reply to cmd lasts
// before it is given up; false when it is waited for to the end. On the
// CPU only the training commands wait on peers (gloo's collectives finish
// before the reply). On a GPU, NCCL's collectives run behind the reply,
// and the next command that meets the device waits on them: any command
// already seen is held to its slowest. The stop barrier waits, by design,
// for rank 0 to write its checkpoint, which may take long: it is never
// given up.
func (m *model) patience(cmd string) (time.Duration, bool) {
	slowest, seen := m.slowest[cmd]
	switch {
	case cmd == "barrier":
		return 0, false
	case stepCommand(cmd):
	case !strings.HasPrefix(m.device, "cuda") || !seen:
		return 0, false
	}
	return max(interruptGrace, slowFactor*slowest), true
}

// stopped is the error of an interrupted wait for w, begun at start,
// when a worker of this machine is stopped (it will not answer, nor will
// its peers); nil when none is.
func (m *model) stopped(w *worker, start time.Time) error {
	for _, o := range m.workers {
		if o.cmd.Process != nil && processStopped(o.cmd.Process.Pid) {
			return m.fail(m.stalled(w, start, fmt.Sprintf("rank %d (pid %d) on this machine is stopped (SIGSTOP or a debugger)", o.rank, o.cmd.Process.Pid)))
		}
	}
	return nil
}

// stalled is the error of an interrupted wait for w, begun at start, given
// up: why is the stopped rank when one is known.
func (m *model) stalled(w *worker, start time.Time, why string) *StalledError {
	cmd := w.outstanding[0].cmd
	return &StalledError{Rank: w.rank, Command: cmd, Waited: time.Since(start), Slowest: m.slowest[cmd], Stopped: why, Timeout: m.collective}
}

// StalledError is an interrupted run's wait for a worker's reply, given
// up because a peer rank stalled: the run could not finish its step.
// It is engine.ErrInterrupted.
type StalledError struct {
	// Rank waited Waited for its reply to Command, whose slowest reply
	// before took Slowest (0: none came before).
	Rank    int
	Command string
	Waited  time.Duration
	Slowest time.Duration
	// Stopped names the rank of this machine that is stopped; "" when
	// the stalled peer is elsewhere.
	Stopped string
	// Timeout is the collective's, which would have ended the wait.
	Timeout time.Duration
}

func (e *StalledError) Error() string {
	s := fmt.Sprintf("rank %d waited %s for its reply to %s", e.Rank, e.Waited.Round(100*time.Millisecond), e.Command)
	if e.Stopped != "" {
		return s + ": " + e.Stopped
	}
	if e.Slowest > 0 {
		s += fmt.Sprintf(" (the slowest before took %s)", e.Slowest.Round(time.Millisecond))
	}
	return s + fmt.Sprintf(": a peer rank is stalled (stopped, hung, or its machine or network is), and the collective would have waited up to %s", e.Timeout)
}

// Is makes a stalled wait engine.ErrInterrupted.
func (e *StalledError) Is(target error) bool { return target == engine.ErrInterrupted }
