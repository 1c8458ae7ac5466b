package native

import (
	"fmt"
	"runtime/debug"
	"sync"
)

// pool runs work on a fixed number of workers. Every split is static (the
// same ranges for the same sizes and worker count), so results never
// depend on scheduling: that is what makes training deterministic with
// parallel kernels. Worker 0 is the calling goroutine; the others are
// long-lived goroutines, so a fork-join costs a channel send and a wait,
// about a microsecond.
type pool struct {
	n    int
	jobs []chan func(int)
	wg   sync.WaitGroup
	mu   sync.Mutex // one fork-join at a time
	// panicked holds the first panic a worker recovered during a run; run
	// re-raises it on the calling goroutine, where the API boundary turns
	// it into an error.
	panicked any
	stack    []byte
	pmu      sync.Mutex
}

func newPool(n int) *pool {
	if n < 1 {
		n = 1
	}
	p := &pool{n: n}
	for w := 1; w < n; w++ {
		ch := make(chan func(int))
		p.jobs = append(p.jobs, ch)
		go func(w int, ch chan func(int)) {
			for f := range ch {
				p.call(f, w)
				p.wg.Done()
			}
		}(w, ch)
	}
	return p
}

// poolShare, when set (by a test that measures), is called as each
// worker's share of a run begins and returns what to call as it ends.
var poolShare func(w int) (end func())

func (p *pool) call(f func(int), w int) {
	if h := poolShare; h != nil {
		defer h(w)()
	}
	defer func() {
		if r := recover(); r != nil {
			p.pmu.Lock()
			if p.panicked == nil {
				p.panicked, p.stack = r, debug.Stack()
			}
			p.pmu.Unlock()
		}
	}()
	f(w)
}

// run calls f(w) for every worker w and waits for all of them.
func (p *pool) run(f func(w int)) {
	if p.n == 1 {
		f(0)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wg.Add(p.n - 1)
	for _, ch := range p.jobs {
		ch <- f
	}
	p.call(f, 0)
	p.wg.Wait()
	if p.panicked != nil {
		r, st := p.panicked, p.stack
		p.panicked, p.stack = nil, nil
		panic(fmt.Sprintf("%v\n(worker stack)\n%s", r, st))
	}
}

// span returns worker w's share [lo, hi) of n items split into p.n
// contiguous ranges.
func (p *pool) span(n, w int) (lo, hi int) {
	return n * w / p.n, n * (w + 1) / p.n
}

// forRange splits [0, n) into contiguous static ranges, one per worker,
// and calls f on each non-empty one. Below grain items it runs inline.
func (p *pool) forRange(n, grain int, f func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if p.n == 1 || n < grain*2 {
		f(0, n)
		return
	}
	p.run(func(w int) {
		if lo, hi := p.span(n, w); lo < hi {
			f(lo, hi)
		}
	})
}

// close stops the workers.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range p.jobs {
		close(ch)
	}
	p.jobs = nil
	p.n = 1
}
