package torch

import (
	"testing"
	"time"
)

// TestStallIsFirstReportedOnTime: whatever the phase of the model's
// ticker against the start of a wait, the first report of a long wait
// comes within a tick of stallReport, and the later ones once each
// stallReport after. Before, the ticker ticked at stallReport and a
// wait begun just after a tick was first reported near twice it.
func TestStallIsFirstReportedOnTime(t *testing.T) {
	tick := stallTick()
	if tick > stallReport/5 {
		t.Fatalf("a tick of %v for reports every %v", tick, stallReport)
	}
	for phase := time.Duration(0); phase < tick; phase += tick / 7 {
		next := stallReport
		var reports []time.Duration
		// Ticks at phase, phase+tick, ... after the wait began.
		for at := phase; at < 3*stallReport+tick; at += tick {
			var due bool
			if due, next = stallDue(at, next); due {
				reports = append(reports, at)
			}
		}
		if len(reports) != 3 {
			t.Fatalf("phase %v: reports at %v, want 3", phase, reports)
		}
		for i, at := range reports {
			if want := time.Duration(i+1) * stallReport; at < want || at >= want+tick {
				t.Errorf("phase %v: report %d at %v, want within a tick of %v", phase, i+1, at, want)
			}
		}
	}
}

// TestInterruptGivesUpWaitsOnPeersAlone: after an interrupt, a wait is
// given up only where it can be on a peer: a training command on the CPU,
// any command seen before on a GPU (NCCL runs behind the replies), never
// the stop barrier, which waits for rank 0's checkpoint. Its patience is
// four times the command's slowest reply, at least interruptGrace.
func TestInterruptGivesUpWaitsOnPeersAlone(t *testing.T) {
	seen := map[string]time.Duration{"get_state": 3 * time.Second, "barrier": time.Second, "train+step": 2 * time.Second, "step": time.Millisecond}
	for _, c := range []struct {
		device, cmd string
		want        time.Duration // 0: never given up
	}{
		{"cpu", "train+step", 8 * time.Second},
		{"cpu", "step", interruptGrace},
		{"cpu", "train", interruptGrace},
		{"cpu", "get_state", 0},
		{"cpu", "barrier", 0},
		{"cuda:0", "get_state", 12 * time.Second},
		{"cuda:0", "eval", 0},
		{"cuda:0", "barrier", 0},
	} {
		m := &model{device: c.device, slowest: seen}
		d, ok := m.patience(c.cmd)
		if ok != (c.want > 0) || d != c.want {
			t.Errorf("%s on %s: patience %v (%v), want %v", c.cmd, c.device, d, ok, c.want)
		}
	}
	// A step's first reply warms up, and is not what later ones are held to.
	m := &model{slowest: map[string]time.Duration{}}
	m.timed(sent{cmd: "train+step", step: 1}, time.Minute)
	m.timed(sent{cmd: "train+step", step: 2}, time.Second)
	m.timed(sent{cmd: "get_state", step: 1}, 2*time.Second)
	if m.slowest["train+step"] != time.Second || m.slowest["get_state"] != 2*time.Second {
		t.Errorf("slowest %v", m.slowest)
	}
}
