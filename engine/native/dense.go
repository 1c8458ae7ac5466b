package native

import (
	"sync"

	"gonum.org/v1/gonum/blas"

	"pipe/stdlib"
)

// blasThreadsMu is held while a model runs a product on OpenBLAS's
// threads.
var blasThreadsMu sync.Mutex

// gemm computes C = alpha·op(A)·op(B) + beta·C (row-major) with the
// workers splitting C's rows, or its columns when there are too few rows.
// Each element of C is computed by one worker, so the split does not
// change the result.
func (m *model) gemm(tA, tB blas.Transpose, rows, cols, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if rows == 0 || cols == 0 {
		return
	}
	work := rows * cols * k
	// OpenBLAS's thread count is the process's: one model at a time
	// takes it; another meanwhile runs its product on one thread.
	if m.gemmThreads > 1 && work >= 1<<16 && blasThreadsSettable && blasThreadsMu.TryLock() {
		restore := blasThreads(m.gemmThreads)
		blasImpl.Sgemm(tA, tB, rows, cols, k, alpha, a, lda, b, ldb, beta, c, ldc)
		restore()
		blasThreadsMu.Unlock()
		return
	}
	w := m.pool.n
	if w == 1 || work < 1<<16 {
		blasImpl.Sgemm(tA, tB, rows, cols, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if rows >= 4*w {
		m.pool.run(func(wk int) {
			lo, hi := m.pool.span(rows, wk)
			if lo >= hi {
				return
			}
			var aa []float32
			if tA == blas.Trans {
				aa = a[lo:]
			} else {
				aa = a[lo*lda:]
			}
			blasImpl.Sgemm(tA, tB, hi-lo, cols, k, alpha, aa, lda, b, ldb, beta, c[lo*ldc:], ldc)
		})
		return
	}
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(cols, wk)
		if lo >= hi {
			return
		}
		var bb []float32
		if tB == blas.Trans {
			bb = b[lo*ldb:]
		} else {
			bb = b[lo:]
		}
		blasImpl.Sgemm(tA, tB, rows, hi-lo, k, alpha, a, lda, bb, ldb, beta, c[lo:], ldc)
	})
}

// denseKernel is y = act(x·Wᵀ + b) on vectors (W is [out, in], PyTorch's
// Linear), the activation fused when the plan says. lowrank_dense is the
// same with W = Σ_i U_i·V_i never formed: t = [x·U_1, …, x·U_T] (kept)
// and y = t·[V_1; …; V_T] + b, two products through a rank T·R
// bottleneck.
type denseKernel struct {
	in, out int
	rows    int // tokens per sample: 1 for a vector
	w, b    *param
	act     actKind
	// lowrank: u is [terms, in, rank], v is [terms, rank, out].
	lowrank     bool
	terms, rank int
	u, v        *param
}

func (k *denseKernel) spec() kspec {
	sp := kspec{saveIn: []bool{true}, saveOut: k.act.fromOut()}
	if k.act.fromIn() {
		sp.aux = append(sp.aux, bsize{perSample: k.out * k.rows})
	}
	if k.lowrank {
		tr := k.terms * k.rank
		sp.aux = append(sp.aux, bsize{perSample: tr})
		sp.tmpB = []bsize{{perSample: tr}}
	}
	return sp
}

func (k *denseKernel) preact(e *env) []float32 {
	if k.act.fromIn() {
		return e.aux[0][:e.n*k.rows*k.out]
	}
	return nil
}

func (k *denseKernel) forward(e *env) {
	n := e.n * k.rows
	x, y := e.in[0], e.out
	z := y
	if k.act.fromIn() {
		z = e.aux[0]
	}
	var beta float32
	if k.b != nil {
		for i := 0; i < n; i++ {
			copy(z[i*k.out:(i+1)*k.out], k.b.data)
		}
		beta = 1
	}
	if k.lowrank {
		tr := k.terms * k.rank
		t := e.aux[len(e.aux)-1]
		for i := 0; i < k.terms; i++ {
			m := k.in * k.rank
			e.m.gemm(blas.NoTrans, blas.NoTrans, n, k.rank, k.in, 1, x, k.in, k.u.data[i*m:], k.rank, 0, t[i*k.rank:], tr)
		}
		e.m.gemm(blas.NoTrans, blas.NoTrans, n, k.out, tr, 1, t, tr, k.v.data, k.out, beta, z, k.out)
	} else {
		e.m.gemm(blas.NoTrans, blas.Trans, n, k.out, k.in, 1, x, k.in, k.w.data, k.in, beta, z, k.out)
	}
	if k.act != actNone {
		sz := n * k.out
		e.m.pool.forRange(sz, grain, func(lo, hi int) { applyAct(k.act, y[lo:hi], z[lo:hi]) })
	}
}

func (k *denseKernel) backward(e *env) {
	n := e.n * k.rows
	x, g := e.in[0], e.dout
	sz := n * k.out
	if k.act != actNone {
		e.m.pool.forRange(sz, grain, func(lo, hi int) {
			if k.act.fromIn() {
				actBackward(k.act, g[lo:hi], e.aux[0][lo:hi], nil)
			} else {
				actBackward(k.act, g[lo:hi], nil, e.out[lo:hi])
			}
		})
	}
	if k.b != nil {
		e.m.pool.forRange(k.out, 64, func(lo, hi int) {
			db := k.b.grad[lo:hi]
			for i := 0; i < n; i++ {
				addTo(db, g[i*k.out+lo:i*k.out+hi])
			}
		})
	}
	var beta float32
	if e.din[0] != nil && e.acc[0] {
		beta = 1
	}
	if k.lowrank {
		tr := k.terms * k.rank
		t := e.aux[len(e.aux)-1]
		dt := e.tmp[0]
		// dV += tᵀ·g; dt = g·Vᵀ; dU_i += xᵀ·dt_i; dx = Σ_i dt_i·U_iᵀ.
		e.m.gemm(blas.Trans, blas.NoTrans, tr, k.out, n, 1, t, tr, g, k.out, 1, k.v.grad, k.out)
		e.m.gemm(blas.NoTrans, blas.Trans, n, tr, k.out, 1, g, k.out, k.v.data, k.out, 0, dt, tr)
		m := k.in * k.rank
		for i := 0; i < k.terms; i++ {
			e.m.gemm(blas.Trans, blas.NoTrans, k.in, k.rank, n, 1, x, k.in, dt[i*k.rank:], tr, 1, k.u.grad[i*m:], k.rank)
		}
		if e.din[0] != nil {
			for i := 0; i < k.terms; i++ {
				b := beta
				if i > 0 {
					b = 1
				}
				e.m.gemm(blas.NoTrans, blas.Trans, n, k.in, k.rank, 1, dt[i*k.rank:], tr, k.u.data[i*m:], k.rank, b, e.din[0], k.in)
			}
		}
		return
	}
	// dW += gᵀ·x; dx = g·W.
	e.m.gemm(blas.Trans, blas.NoTrans, k.out, k.in, n, 1, g, k.out, x, k.in, 1, k.w.grad, k.in)
	if e.din[0] != nil {
		e.m.gemm(blas.NoTrans, blas.NoTrans, n, k.in, k.out, 1, g, k.out, k.w.data, k.in, beta, e.din[0], k.in)
	}
}

func init() {
	registerKernel("dense", opKernel{build: buildDense, fuses: true, tokens: true})
	registerKernel("lowrank_dense", opKernel{build: buildDense, fuses: true})
}

// buildDense is a dense or lowrank_dense kernel with its fused
// activation.
func buildDense(m *model, u *unit, t tail) (kernel, error) {
	first, a := u.nodes[0], u.nodes[0].Args
	in := u.in0()
	if in.spatial {
		return nil, unsupported(first, "over [C, H, W] maps the last axis; the cpu backend runs dense on vectors (flatten or gap first)")
	}
	k := &denseKernel{in: in.c, out: u.out.c, act: t.act, rows: in.rows()}
	if first.Op == "dense" {
		k.w = m.newParam(first.Name+".weight", []int64{int64(k.out), int64(k.in)})
	} else {
		k.lowrank, k.terms, k.rank = true, int(a.Terms), int(a.Rank)
		if k.terms < 1 || k.rank < 1 {
			return nil, unsupported(first, "needs terms and rank of at least 1")
		}
		k.u = m.newParam(first.Name+".u", []int64{a.Terms, int64(k.in), a.Rank})
		k.v = m.newParam(first.Name+".v", []int64{a.Terms, a.Rank, int64(k.out)})
	}
	if a.Bias {
		k.b = m.newParam(first.Name+".bias", []int64{int64(k.out)})
	}
	return k, nil
}

// denseOnly says whether g's work is all dense products and the
// elementwise ops around them: an MLP. Such a model runs its matrix
// products on OpenBLAS's own threads and everything else on the calling
// goroutine alone (a pool of one), instead of splitting both across the
// pool. OpenBLAS shares one packing of the weights between its threads
// where the pool's halves each pack all of them, and its threads poll
// between calls where a pool worker parks; the elementwise work of an
// MLP (bias, activation, loss, Adam) is too small to pay for a fork-join
// and, split, ran beside OpenBLAS's polling thread on the other core.
// Measured on bench/models/mlp.pipe (a loop of 2,000 steps, median,
// three interleaved runs each, quiet): 0.43 ms a step (Adam 0.08)
// against 0.55 (Adam 0.12) with only the products on OpenBLAS and 0.61
// to 0.66 with everything on the pool. In any other model OpenBLAS's
// polling threads took the cores from the pool's workers: the Fashion
// CNN's step went from 11.1 to 15.0 ms and the ViT's from 116 to 157 ms
// with every product on OpenBLAS's threads (BenchmarkStep*, min of 3).
func denseOnly(g *stdlib.Graph) bool {
	dense := false
	for _, n := range g.Nodes {
		switch n.Op {
		case "dense", "lowrank_dense":
			dense = true
		case "input", "flatten", "dropout", "relu", "gelu", "silu", "hardswish", "sigmoid", "tanh", "leakyrelu", "softmax":
		default:
			return false
		}
	}
	return dense
}
