package native

import (
	"sync"
	"time"

	"gonum.org/v1/gonum/blas"
)

// SgemmGFLOPS measures the machine's matrix-product speed through the
// engine's BLAS (OpenBLAS through gonum's netlib binding; gonum's own in
// a build without cgo), as the reference that bench/cmd/ratios holds the
// convolutions' speed to: C = A·B for n × n float32 matrices, repeated
// for about d, on threads threads, in the faster of two ways: B's and C's
// columns split among threads goroutines that each call a
// single-threaded sgemm (how the engine's kernels run), and one call
// with BLAS's own threads set to threads (blasThreads; where it cannot
// set them, the first way only). It returns the best call's GFLOP/s,
// timed by the clock.
func SgemmGFLOPS(n, threads int, d time.Duration) float64 {
	setupBLAS()
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i] = float32(i%13) / 13
		b[i] = float32(i%7) / 7
	}
	split := func() {
		var wg sync.WaitGroup
		for t := 0; t < threads; t++ {
			lo, hi := t*n/threads, (t+1)*n/threads
			wg.Add(1)
			go func() {
				defer wg.Done()
				if hi > lo {
					blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, n, hi-lo, n, 1, a, n, b[lo:], n, 0, c[lo:], n)
				}
			}()
		}
		wg.Wait()
	}
	whole := func() {
		restore := blasThreads(threads)
		defer restore()
		blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a, n, b, n, 0, c, n)
	}
	flops := 2 * float64(n) * float64(n) * float64(n)
	best := 0.0
	ways := []func(){split}
	if blasThreadsSettable {
		ways = append(ways, whole)
	}
	for _, f := range ways {
		f() // warm: pages, packing buffers, threads
		for start := time.Now(); time.Since(start) < d/time.Duration(len(ways)); {
			t0 := time.Now()
			f()
			best = max(best, flops/time.Since(t0).Seconds()/1e9)
		}
	}
	return best
}
