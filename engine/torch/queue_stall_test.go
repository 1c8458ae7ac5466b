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
