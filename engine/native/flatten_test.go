package native

import (
	"fmt"
	"slices"
	"testing"
)

// TestFlattenSplitByChannel holds the flatten's transposes, split by
// channel among the workers, to their definition (x[c][i] is sample i's
// feature block c), forward and backward, overwriting and adding, on 1
// to 3 threads, with channel counts that do not divide evenly and are
// large enough to be split (and split: one share per worker).
func TestFlattenSplitByChannel(t *testing.T) {
	for _, threads := range []int{1, 2, 3} {
		for _, sz := range []struct{ c, h, w, n int }{{131, 7, 9, 5}, {331, 3, 5, 7}} {
			t.Run(fmt.Sprintf("threads%d/c%d_%dx%d_n%d", threads, sz.c, sz.h, sz.w, sz.n), func(t *testing.T) {
				l := layout{spatial: true, c: sz.c, h: sz.h, w: sz.w}
				s, n := l.s(), sz.n
				if threads > 1 && l.c < 2*max(1, grain/(n*s)) {
					t.Fatal("too few channels to be split")
				}
				m := &model{pool: newPool(threads)}
				defer m.pool.close()
				total := l.c * n * s
				x := make([]float32, total)
				for i := range x {
					x[i] = float32(i)
				}
				// want[(i*C+c)*s+j] = x[(c*n+i)*s+j]
				want := make([]float32, total)
				for c := 0; c < l.c; c++ {
					for i := 0; i < n; i++ {
						copy(want[(i*l.c+c)*s:(i*l.c+c+1)*s], x[(c*n+i)*s:])
					}
				}
				e := &env{m: m, u: &unit{in: []layout{l}}, n: n, in: [][]float32{x}, out: make([]float32, total)}
				var shares [3]int
				poolShare = func(w int) func() { shares[w]++; return func() {} }
				flattenKernel{}.forward(e)
				poolShare = nil
				if want := [3]int{1, 1, threads - 2}; threads > 1 && shares != want {
					t.Errorf("forward: shares per worker %v, want one each of %d", shares, threads)
				}
				if !slices.Equal(e.out, want) {
					t.Fatal("forward: not the transpose")
				}
				for _, acc := range []bool{false, true} {
					dx := make([]float32, total)
					for i := range dx {
						dx[i] = 0.5
					}
					e.dout, e.din, e.acc = want, [][]float32{dx}, []bool{acc}
					flattenKernel{}.backward(e)
					for i := range dx {
						w := x[i]
						if acc {
							w += 0.5
						}
						if dx[i] != w {
							t.Fatalf("backward (acc %v): dx[%d] = %v, want %v", acc, i, dx[i], w)
						}
					}
				}
			})
		}
	}
}
