//go:build cgo

// Package cvec holds loops of package native written in C, so that the
// compiler vectorises them (Go does not), where profiles showed the Go
// loop to matter; each computes exactly what the Go loop beside it in
// package native computes, and a test there holds them equal. It is apart
// from package native because a package with cgo cannot also hold Go
// assembly.
package cvec

/*
#cgo CFLAGS: -O3 -std=c11
#cgo LDFLAGS: -lm
#include "cvec.h"
*/
import "C"

import "unsafe"

// Built says this build has the C loops; without cgo it has not.
const Built = true

// Max2x2Planes is native.max2x2 (pool2d.go) on n planes of h×w one after
// another, in one call (a call per plane cost more than the pooling of a
// 14×14 plane).
func Max2x2Planes(src, dst []float32, ix []int32, w, h, ho, wo, n int) {
	if ho == 0 || wo == 0 || n == 0 {
		return
	}
	_, _, _ = src[n*h*w-1], dst[n*ho*wo-1], ix[n*ho*wo-1]
	if h < 2*ho || w < 2*wo {
		panic("cvec: Max2x2Planes: plane smaller than its output")
	}
	C.max2x2_planes((*C.float)(unsafe.Pointer(unsafe.SliceData(src))), (*C.float)(unsafe.Pointer(unsafe.SliceData(dst))),
		(*C.int)(unsafe.Pointer(unsafe.SliceData(ix))), C.int(w), C.int(h), C.int(ho), C.int(wo), C.int(n))
}

// Gelu is native's applyAct for gelu, c1 the float32 of 1/√2.
func Gelu(dst, src []float32, c1 float32) {
	if len(src) == 0 {
		return
	}
	dst = dst[:len(src)]
	C.gelu(f32p(dst), f32p(src), C.float(c1), C.long(len(src)))
}

// GeluGrad is native's actBackward for gelu, c2 the float32 of 1/√(2π).
func GeluGrad(g, x []float32, c1, c2 float32) {
	if len(g) == 0 {
		return
	}
	x = x[:len(g)]
	C.gelu_grad(f32p(g), f32p(x), C.float(c1), C.float(c2), C.long(len(g)))
}

// ExpSub is native's exp32(x[i] - sub) into dst, which may be x.
func ExpSub(dst, x []float32, sub float32) {
	if len(x) == 0 {
		return
	}
	dst = dst[:len(x)]
	C.exp_sub(f32p(dst), f32p(x), C.float(sub), C.long(len(x)))
}

// AffineRelu is native.affineRelu.
func AffineRelu(dst, src []float32, a, b float32) {
	if len(src) == 0 {
		return
	}
	dst = dst[:len(src)]
	C.affine_relu(f32p(dst), f32p(src), C.float(a), C.float(b), C.long(len(src)))
}

// BnDx is native.bnDx; out is read only with relu.
func BnDx(dx, g, x, out []float32, mean, k, fn, sg, xk float32, relu, acc bool) {
	n := len(g)
	if n == 0 {
		return
	}
	dx, x = dx[:n], x[:n]
	var op *C.float
	if relu {
		op = f32p(out[:n])
	}
	C.bn_dx(f32p(dx), f32p(g), f32p(x), op, C.float(mean), C.float(k), C.float(fn), C.float(sg), C.float(xk), cbool(relu), cbool(acc), C.long(n))
}

// Sum64 is native.sum64.
func Sum64(x []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	return float64(C.sum64(f32p(x), C.long(len(x))))
}

// SumSqDev is the second pass of native.meanVar: Σ (x-m)², float32 within
// blocks of 512 values and float64 across.
func SumSqDev(x []float32, m float32) float64 {
	if len(x) == 0 {
		return 0
	}
	return float64(C.sum_sq_dev(f32p(x), C.float(m), C.long(len(x))))
}

// SumCentered is native.sumCentered; out is read only with relu.
func SumCentered(g, x, out []float32, mean float32, relu bool) (sg, sgx float64) {
	n := len(g)
	if n == 0 {
		return 0, 0
	}
	x = x[:n]
	var op *C.float
	if relu {
		op = f32p(out[:n])
	}
	var a, b C.double
	C.sum_centered(f32p(g), f32p(x), op, C.float(mean), cbool(relu), C.long(n), &a, &b)
	return float64(a), float64(b)
}

// Max2x2PlanesEval is Max2x2Planes without the indices, for inference.
func Max2x2PlanesEval(src, dst []float32, w, h, ho, wo, n int) {
	if ho == 0 || wo == 0 || n == 0 {
		return
	}
	_, _ = src[n*h*w-1], dst[n*ho*wo-1]
	if h < 2*ho || w < 2*wo {
		panic("cvec: Max2x2PlanesEval: plane smaller than its output")
	}
	C.max2x2_planes_eval(f32p(src), f32p(dst), C.int(w), C.int(h), C.int(ho), C.int(wo), C.int(n))
}

// UseMax2x2Eval makes Max2x2PlanesEval run one path: 2 AVX-512, 1 AVX2,
// 0 the compiler's loop, -2 the CPU's best (the default). It reports
// whether this CPU runs that path; tests compare them.
func UseMax2x2Eval(isa int) bool { return C.max2x2_eval_use(C.int(isa)) != 0 }

// UseMax2x2 makes Max2x2Planes run one path, as UseMax2x2Eval does for
// Max2x2PlanesEval.
func UseMax2x2(isa int) bool { return C.max2x2_use(C.int(isa)) != 0 }

// MaxOf4Rows is native.maxOf4Rows.
func MaxOf4Rows(c []int32, m, co, ldc int) {
	if m == 0 || co == 0 {
		return
	}
	if co > ldc {
		panic("cvec: MaxOf4Rows: more channels than the row holds")
	}
	_ = c[(4*m-1)*ldc+co-1]
	C.max_of_4_rows((*C.int32_t)(unsafe.Pointer(&c[0])), C.int(m), C.int(co), C.int(ldc))
}

// QuantU8 is native.actQuant.quantRow: dst[i] = clamp(round(src[i]·inv),
// lo, hi) + zero.
func QuantU8(dst []uint8, src []float32, inv float32, lo, hi, zero int32) {
	if len(src) == 0 {
		return
	}
	dst = dst[:len(src)]
	C.quant_u8(u8p(dst), f32p(src), C.float(inv), C.int(lo), C.int(hi), C.int(zero), C.long(len(src)))
}

// QuantNHWC is native.qconvKernel.quantNHWC: pixels [p0, p1) of the ci
// planes of pix floats in x, quantised as QuantU8 does, to xq pixel-major
// (xq[p·ci + c]).
func QuantNHWC(xq []uint8, x []float32, pix, ci, p0, p1 int, inv float32, lo, hi, zero int32) {
	if p1 <= p0 || ci == 0 {
		return
	}
	_, _ = x[(ci-1)*pix+p1-1], xq[p1*ci-1]
	if p0 < 0 || p1 > pix {
		panic("cvec: QuantNHWC: pixels out of range")
	}
	C.quant_nhwc(u8p(xq), f32p(x), C.long(pix), C.int(ci), C.long(p0), C.long(p1), C.float(inv), C.int(lo), C.int(hi), C.int(zero))
}

// RequantT is native.qlayer.requantGo with no activation or a relu:
// y[o·P + i] = (c[i·cop + o] − corr[o])·mul[o] + bias[o] for o < co,
// i < rows.
func RequantT(y []float32, P int, c []int32, cop, rows, co int, mul, bias []float32, corr []int32, relu bool) {
	if rows == 0 || co == 0 {
		return
	}
	_, _ = y[(co-1)*P+rows-1], c[(rows-1)*cop+co-1]
	_, _, _ = mul[co-1], bias[co-1], corr[co-1]
	if co > cop || rows > P {
		panic("cvec: RequantT: rows or channels out of range")
	}
	C.requant_t(f32p(y), C.long(P), i32p(c), C.long(cop), C.long(rows), C.long(co), f32p(mul), f32p(bias), i32p(corr), cbool(relu))
}

// RequantRow is one row of native.qdenseKernel's requantisation:
// dst[o] = (c[o] − corr[o])·mul[o] + bias[o], then a relu when asked.
func RequantRow(dst []float32, c []int32, mul, bias []float32, corr []int32, relu bool) {
	n := len(dst)
	if n == 0 {
		return
	}
	_, _, _, _ = c[n-1], mul[n-1], bias[n-1], corr[n-1]
	C.requant_row(f32p(dst), i32p(c), f32p(mul), f32p(bias), i32p(corr), cbool(relu), C.long(n))
}

func f32p(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }

func i32p(s []int32) *C.int32_t { return (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(s))) }

func u8p(s []uint8) *C.uint8_t { return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(s))) }

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
