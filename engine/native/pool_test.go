package native

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolRunsEveryWorkerOnce runs many fork-joins, some back to back and
// some after gaps of a few milliseconds (the workers park), and checks
// that every worker ran each job exactly once and that run returned only
// after all of them.
func TestPoolRunsEveryWorkerOnce(t *testing.T) {
	const n = 3
	p := newPool(n)
	defer p.close()
	var counts [n]atomic.Int64
	for i := range 400 {
		switch {
		case i%50 == 49:
			time.Sleep(3 * time.Millisecond) // every worker parks
		case i%7 == 0:
			time.Sleep(20 * time.Microsecond)
		}
		p.run(func(w int) {
			if w == 1 && i%3 == 0 {
				time.Sleep(50 * time.Microsecond) // the caller waits for a slow worker
			}
			counts[w].Add(1)
		})
		for w := range n {
			if got := counts[w].Load(); got != int64(i+1) {
				t.Fatalf("after run %d worker %d ran %d times", i+1, w, got)
			}
		}
	}
}

// TestPoolPanicReachesCaller checks that a worker's panic is raised on the
// calling goroutine with the worker's stack, and that the pool still
// works afterwards.
func TestPoolPanicReachesCaller(t *testing.T) {
	p := newPool(2)
	defer p.close()
	func() {
		defer func() {
			r := recover()
			s, _ := r.(string)
			if !strings.Contains(s, "boom in worker 1") || !strings.Contains(s, "worker stack") {
				t.Fatalf("recovered %v, want the worker's panic with its stack", r)
			}
		}()
		p.run(func(w int) {
			if w == 1 {
				panic("boom in worker 1")
			}
		})
		t.Fatal("run returned after a worker panicked")
	}()
	var ran atomic.Int32
	p.run(func(int) { ran.Add(1) })
	if ran.Load() != 2 {
		t.Fatalf("after the panic a run reached %d workers, want 2", ran.Load())
	}
}

// TestPoolCloseStopsWorkers checks that close ends the worker goroutines,
// parked or polling, and that run then works on the caller alone.
func TestPoolCloseStopsWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	polling := newPool(3)
	parked := newPool(3)
	parked.run(func(int) {})
	polling.run(func(int) {})
	time.Sleep(3 * time.Millisecond)
	polling.run(func(int) {})
	polling.close()
	parked.close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Fatalf("%d goroutines after close, %d before the pools", g, before)
	}
	var ran atomic.Int32
	parked.run(func(w int) { ran.Add(int32(w + 1)) })
	if ran.Load() != 1 {
		t.Fatalf("a closed pool ran worker sum %d, want only worker 0", ran.Load())
	}
}
