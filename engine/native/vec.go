package native

// Elementwise loops of the hot path. Go does not vectorise, so these are
// written for the scalar pipeline: no branches on data (a relu's branch
// mispredicts half the time on real activations and costs more than the
// arithmetic), four independent accumulators, and slices re-sliced to a
// common length so the compiler drops the bounds checks. Sums of
// gradients accumulate in float64 (sumCentered); sums of squares, which
// do not cancel, are float32 within blocks of reduceBlock values and
// float64 across blocks.

import (
	"math"

	"pipe/engine/native/internal/cvec"
)

const reduceBlock = 512

// cMin is the least length for which the loops below call their C twins
// in internal/cvec (the same bits, vectorised; a cgo call costs about as
// much as 64 values of the Go loop).
const cMin = 64

// relu32 is max(v, 0) without a branch: negative values and -0 give +0,
// NaN stays NaN (as in PyTorch, so a NaN is caught downstream).
func relu32(v float32) float32 {
	u := math.Float32bits(v)
	neg := uint32(int32(u) >> 31)
	return math.Float32frombits(u &^ (neg &^ nanMask(u)))
}

// nanMask is all ones when the float32 with bits u is NaN, else 0.
func nanMask(u uint32) uint32 {
	return uint32(int32(0x7f800000-(u&0x7fffffff)) >> 31)
}

// keepIfPos returns g when out > 0, else 0, for out >= 0 (a relu's
// output).
func keepIfPos(g, out float32) float32 {
	m := math.Float32bits(out)
	return math.Float32frombits(math.Float32bits(g) & -(uint32(-int32(m)) >> 31))
}

// affineRelu sets dst = relu(a·src + b).
func affineRelu(dst, src []float32, a, b float32) {
	if cvec.Built && len(src) >= cMin {
		cvec.AffineRelu(dst, src, a, b)
		return
	}
	affineReluGo(dst, src, a, b)
}

func affineReluGo(dst, src []float32, a, b float32) {
	dst = dst[:len(src)]
	i := 0
	for ; i+4 <= len(src); i += 4 {
		s := src[i : i+4 : i+4]
		d := dst[i : i+4 : i+4]
		d[0] = relu32(a*s[0] + b)
		d[1] = relu32(a*s[1] + b)
		d[2] = relu32(a*s[2] + b)
		d[3] = relu32(a*s[3] + b)
	}
	for ; i < len(src); i++ {
		dst[i] = relu32(a*src[i] + b)
	}
}

// affine sets dst = a·src + b.
func affine(dst, src []float32, a, b float32) {
	dst = dst[:len(src)]
	i := 0
	for ; i+4 <= len(src); i += 4 {
		s := src[i : i+4 : i+4]
		d := dst[i : i+4 : i+4]
		d[0] = a*s[0] + b
		d[1] = a*s[1] + b
		d[2] = a*s[2] + b
		d[3] = a*s[3] + b
	}
	for ; i < len(src); i++ {
		dst[i] = a*src[i] + b
	}
}

// reluMask sets g[i] = 0 where out[i] <= 0.
func reluMask(g, out []float32) {
	out = out[:len(g)]
	for i, o := range out {
		g[i] = keepIfPos(g[i], o)
	}
}

// sumCentered returns Σ g and Σ g·(x-mean); with relu, g is first masked
// by out > 0. It accumulates in float64: these are gradients' sums, whose
// terms of both signs nearly cancel (behind a batchnorm or a residual the
// true sum is often a ten-thousandth of the terms), and float32 partial
// sums lose a percent of such a result. PyTorch's CPU batchnorm
// accumulates in double too.
func sumCentered(g, x, out []float32, mean float32, relu bool) (sg, sgx float64) {
	if cvec.Built && len(g) >= cMin {
		return cvec.SumCentered(g, x, out, mean, relu)
	}
	return sumCenteredGo(g, x, out, mean, relu)
}

func sumCenteredGo(g, x, out []float32, mean float32, relu bool) (sg, sgx float64) {
	n := len(g)
	x = x[:n]
	if relu {
		out = out[:n]
	}
	m := float64(mean)
	var s0, s1, t0, t1 float64
	i := 0
	for ; i+2 <= n; i += 2 {
		gg := g[i : i+2 : i+2]
		xx := x[i : i+2 : i+2]
		g0, g1 := gg[0], gg[1]
		if relu {
			o := out[i : i+2 : i+2]
			g0, g1 = keepIfPos(g0, o[0]), keepIfPos(g1, o[1])
		}
		s0 += float64(g0)
		s1 += float64(g1)
		t0 += float64(g0) * (float64(xx[0]) - m)
		t1 += float64(g1) * (float64(xx[1]) - m)
	}
	for ; i < n; i++ {
		v := g[i]
		if relu {
			v = keepIfPos(v, out[i])
		}
		s0 += float64(v)
		t0 += float64(v) * (float64(x[i]) - m)
	}
	return s0 + s1, t0 + t1
}

// bnDx sets (or adds to, when acc) dx = k·(n·g' - sg - (x-mean)·xk),
// g' = g masked by out > 0 with relu. dx may be g.
func bnDx(dx, g, x, out []float32, mean, k, fn, sg, xk float32, relu, acc bool) {
	if cvec.Built && len(g) >= cMin {
		cvec.BnDx(dx, g, x, out, mean, k, fn, sg, xk, relu, acc)
		return
	}
	bnDxGo(dx, g, x, out, mean, k, fn, sg, xk, relu, acc)
}

func bnDxGo(dx, g, x, out []float32, mean, k, fn, sg, xk float32, relu, acc bool) {
	n := len(g)
	x, dx = x[:n], dx[:n]
	if relu {
		out = out[:n]
	}
	for i := 0; i < n; i++ {
		v := g[i]
		if relu {
			v = keepIfPos(v, out[i])
		}
		d := k * (fn*v - sg - (x[i]-mean)*xk)
		if acc {
			dx[i] += d
		} else {
			dx[i] = d
		}
	}
}

// meanVar returns the mean and biased variance of x, two passes.
func meanVar(x []float32) (mean, variance float64) {
	mean = sum64(x) / float64(len(x))
	m := float32(mean)
	if cvec.Built && len(x) >= cMin {
		return mean, cvec.SumSqDev(x, m) / float64(len(x))
	}
	return mean, sumSqDevGo(x, m) / float64(len(x))
}

// sumSqDevGo is meanVar's second pass, Σ (x-m)².
func sumSqDevGo(x []float32, m float32) float64 {
	var q float64
	for blk := 0; blk < len(x); blk += reduceBlock {
		e := min(blk+reduceBlock, len(x))
		var q0, q1, q2, q3 float32
		i := blk
		for ; i+4 <= e; i += 4 {
			v := x[i : i+4 : i+4]
			d0, d1, d2, d3 := v[0]-m, v[1]-m, v[2]-m, v[3]-m
			q0 += d0 * d0
			q1 += d1 * d1
			q2 += d2 * d2
			q3 += d3 * d3
		}
		for ; i < e; i++ {
			d := x[i] - m
			q0 += d * d
		}
		q += float64(q0 + q1 + q2 + q3)
	}
	return q
}

// sum64 sums x in float64 (a bias's gradient is a sum of terms that
// nearly cancel; see sumCentered).
func sum64(x []float32) float64 {
	if cvec.Built && len(x) >= cMin {
		return cvec.Sum64(x)
	}
	return sum64Go(x)
}

func sum64Go(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s0 += float64(v[0])
		s1 += float64(v[1])
		s2 += float64(v[2])
		s3 += float64(v[3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// addTo adds src into dst elementwise.
func addTo(dst, src []float32) {
	dst = dst[:len(src)]
	i := 0
	for ; i+4 <= len(src); i += 4 {
		d := dst[i : i+4 : i+4]
		s := src[i : i+4 : i+4]
		d[0] += s[0]
		d[1] += s[1]
		d[2] += s[2]
		d[3] += s[3]
	}
	for ; i < len(src); i++ {
		dst[i] += src[i]
	}
}
