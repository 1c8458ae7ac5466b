package torch

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"pipe/engine"
	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/run"
)

// TestLivenessSaysAWorkerDied: the Liveness facet's Lost closes when the
// worker is killed, with no call in progress, and Eval then fails with
// an error matching engine.ErrWorkerLost (what pipe serve watches for).
func TestLivenessSaysAWorkerDied(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "smallconv.pipe", []byte(smallConv), planner.WithEngine("torch"))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	m := buildTorch(t, g, cfg, Backend{Python: py})
	live := m.Capabilities().Liveness
	if live == nil {
		t.Fatal("the torch model has no Liveness facet")
	}
	select {
	case <-live.Lost():
		t.Fatal("Lost is closed while the worker runs")
	default:
	}
	pids := workers(t)
	if len(pids) == 0 {
		t.Fatal("no worker found to kill")
	}
	for _, pid := range pids {
		killProcess(pid)
	}
	select {
	case <-live.Lost():
	case <-time.After(60 * time.Second):
		t.Fatal("Lost is still open a minute after the worker was killed")
	}
	b := randomBatch(g, cfg.Loss.Kind, 2, 1)
	b.Y = nil
	if _, err := m.Eval(b, make([]float32, 2*numel(m.OutShape()))); !errors.Is(err, engine.ErrWorkerLost) {
		t.Fatalf("Eval after the worker died: %v, want an error matching engine.ErrWorkerLost", err)
	}
}

// TestKillEndsAStoppedWorker: Kill ends a worker that no longer runs
// (SIGSTOP, as a hung one looks to pipe serve): Lost closes, a call in
// flight fails with an error matching engine.ErrWorkerLost, and no
// process is left.
func TestKillEndsAStoppedWorker(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "smallconv.pipe", []byte(smallConv), planner.WithEngine("torch"))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	m := buildTorch(t, g, cfg, Backend{Python: py})
	live := m.Capabilities().Liveness
	pids := workers(t)
	if len(pids) == 0 {
		t.Fatal("no worker found to stop")
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	b := randomBatch(g, cfg.Loss.Kind, 2, 1)
	b.Y = nil
	evalErr := make(chan error, 1)
	go func() {
		_, err := m.Eval(b, make([]float32, 2*numel(m.OutShape())))
		evalErr <- err
	}()
	select {
	case err := <-evalErr:
		t.Fatalf("Eval on a stopped worker returned: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	live.Kill()
	select {
	case <-live.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost is still open 30 s after Kill")
	}
	select {
	case err := <-evalErr:
		if !errors.Is(err, engine.ErrWorkerLost) {
			t.Fatalf("Eval in flight as the worker was killed: %v, want an error matching engine.ErrWorkerLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Eval in flight still waits 30 s after Kill")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(b), ") Z ") {
				t.Errorf("worker %d still runs after Kill: %s", pid, b)
			}
		}
	}
}
