package native

import (
	"fmt"
	"slices"
	"testing"
)

// TestConcatSplitAmongWorkers holds the channel join of spatial inputs,
// split by range of the joined tensor among the workers, to its
// definition (the inputs' blocks one after another), forward and
// backward, overwriting and adding, with an input that wants no
// gradient, on 1 to 3 threads, with sizes that do not divide evenly and
// put the boundaries between inputs inside a worker's range; with two
// threads or more each worker takes one share each way.
func TestConcatSplitAmongWorkers(t *testing.T) {
	for _, threads := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("threads%d", threads), func(t *testing.T) {
			ls := []layout{
				{spatial: true, c: 7, h: 13, w: 11},
				{spatial: true, c: 3, h: 13, w: 11},
				{spatial: true, c: 31, h: 13, w: 11},
			}
			out := layout{spatial: true, c: 41, h: 13, w: 11}
			const n = 7
			total := n * out.size()
			if threads > 1 && total < 2*grain {
				t.Fatal("too small to be split")
			}
			m := &model{pool: newPool(threads)}
			defer m.pool.close()
			var ins [][]float32
			var want []float32
			for j, l := range ls {
				x := make([]float32, n*l.size())
				for i := range x {
					x[i] = float32(j*1e6 + i)
				}
				ins = append(ins, x)
				want = append(want, x...)
			}
			e := &env{m: m, u: &unit{in: ls, out: out}, n: n, in: ins, out: make([]float32, total)}
			var shares [3]int
			poolShare = func(w int) func() { shares[w]++; return func() {} }
			defer func() { poolShare = nil }()
			k := &concatKernel{k: len(ls)}
			k.forward(e)
			if want := [3]int{1, 1, threads - 2}; threads > 1 && shares != want {
				t.Errorf("forward: shares per worker %v, want one each of %d", shares, threads)
			}
			if !slices.Equal(e.out, want) {
				t.Fatal("forward: not the inputs one after another")
			}
			for _, acc := range []bool{false, true} {
				shares = [3]int{}
				e.dout = want
				e.din = [][]float32{make([]float32, len(ins[0])), nil, make([]float32, len(ins[2]))}
				e.acc = []bool{acc, acc, acc}
				for _, dx := range e.din {
					for i := range dx {
						dx[i] = 0.5
					}
				}
				k.backward(e)
				if want := [3]int{1, 1, threads - 2}; threads > 1 && shares != want {
					t.Errorf("backward: shares per worker %v, want one each of %d", shares, threads)
				}
				for _, j := range []int{0, 2} {
					for i, got := range e.din[j] {
						w := ins[j][i]
						if acc {
							w += 0.5
						}
						if got != w {
							t.Fatalf("backward (acc %v): dx%d[%d] = %v, want %v", acc, j, i, got, w)
						}
					}
				}
			}
		})
	}
}
