package torch

import (
	"errors"
	"testing"
	"time"

	"pipe/engine"
	"pipe/planner"
	"pipe/run"
)

// TestLivenessSaysAWorkerDied: the Liveness facet's Lost closes when the
// worker is killed, with no call in progress, and Eval then fails with
// an error matching engine.ErrWorkerLost (what pipe serve watches for).
func TestLivenessSaysAWorkerDied(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "smallconv.pipe", []byte(smallConv), planner.WithEngine("torch"))
	cfg := run.ConfigFromPlan(p, decoded(t, prog))
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
