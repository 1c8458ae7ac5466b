package native

import (
	"testing"
	"time"
)

// busyFor keeps the caller busy for d.
func busyFor(d time.Duration) {
	t := time.Now()
	for time.Since(t) < d {
	}
}

// BenchmarkPoolForkJoin times one fork-join of an empty job after a gap of
// other work on the caller (ns/run). A parked worker costs a futex wake:
// on this machine's 2 cores 0.3-0.5 µs back to back, 3-5 µs after 20 µs
// and 7-9 µs after 100 µs. Workers that poll before parking cut the
// middle cases to about 1 µs in some runs, but Go's scheduler places a
// polling goroutine behind the one it waits for often enough (runs of
// 6 to 100 µs, back to back included) that the pool keeps parking.
//
//	CGO_LDFLAGS=-lopenblas go test ./engine/native -run NONE -bench PoolForkJoin
func BenchmarkPoolForkJoin(b *testing.B) {
	for _, gap := range []time.Duration{0, 20 * time.Microsecond, 100 * time.Microsecond} {
		b.Run(gap.String(), func(b *testing.B) {
			p := newPool(2)
			defer p.close()
			var tot time.Duration
			for i := 0; i < b.N; i++ {
				busyFor(gap)
				t := time.Now()
				p.run(func(w int) {})
				tot += time.Since(t)
			}
			b.ReportMetric(float64(tot.Nanoseconds())/float64(b.N), "ns/run")
		})
	}
}
