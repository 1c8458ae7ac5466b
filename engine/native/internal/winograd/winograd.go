//go:build cgo

// Package winograd holds the transforms of the Winograd F(2×2, 3×3) and
// F(4×4, 3×3) convolutions (docs/design/native-winograd.md says the
// algebra), in C so that the compiler vectorises the loops over a row of
// tiles. It is apart from package native because a package with cgo
// cannot also hold Go assembly.
// Shapes: x, y and dy are CNHW (c planes of n images h × w, padding 1);
// V, M are [16][c][ld] (F(4×4): [36][c][ld]), tile t of a block [t0, t1)
// at column t - t0; U and dU are [16][co][ci] ([36][co][ci]); g and dw
// are [co][ci][3][3].
package winograd

/*
#cgo CFLAGS: -O3 -std=c11
#include "winograd.h"
*/
import "C"

import "unsafe"

// Built says this build has the transforms; without cgo it has not.
const Built = true

func fp(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }

// Weights writes U = G·g·Gᵀ for output channels [o0, o1): each of U's
// planes' rows o0 to o1, so that workers can split it.
func Weights(g, u []float32, co, ci, o0, o1 int) {
	if o0 < 0 || o1 > co || o0 >= o1 {
		return
	}
	_, _ = g[co*ci*9-1], u[16*co*ci-1]
	C.wino_wt(fp(g), fp(u), C.int(co), C.int(ci), C.int(o0), C.int(o1))
}

// WeightGrad adds Gᵀ·dU·G into dw.
func WeightGrad(du, dw []float32, co, ci int) {
	_, _ = du[16*co*ci-1], dw[co*ci*9-1]
	C.wino_wgrad(fp(du), fp(dw), C.int(co), C.int(ci))
}

// In writes Bᵀ·d·B of tiles [t0, t1) of x into v; rows holds 4·(w+4)
// values.
func In(x, v []float32, ci, n, h, w, t0, t1, ld int, rows []float32) {
	_, _, _ = x[ci*n*h*w-1], v[15*ci*ld+(ci-1)*ld+t1-t0-1], rows[4*(w+4)-1]
	C.wino_in(fp(x), fp(v), C.int(ci), C.int(n), C.int(h), C.int(w), C.long(t0), C.long(t1), C.int(ld), fp(rows))
}

// Out writes y = Aᵀ·m·A + beta·y for tiles [t0, t1); rows holds 2·(w+4)
// values.
func Out(m, y []float32, co, n, h, w, t0, t1, ld int, beta float32, rows []float32) {
	_, _, _ = y[co*n*h*w-1], m[15*co*ld+(co-1)*ld+t1-t0-1], rows[2*(w+4)-1]
	C.wino_out(fp(m), fp(y), C.int(co), C.int(n), C.int(h), C.int(w), C.long(t0), C.long(t1), C.int(ld), C.float(beta), fp(rows))
}

// Dy writes A·dy·Aᵀ of tiles [t0, t1) of dy into m; rows holds 4·(w+4)
// values.
func Dy(dy, m []float32, co, n, h, w, t0, t1, ld int, rows []float32) {
	_, _, _ = dy[co*n*h*w-1], m[15*co*ld+(co-1)*ld+t1-t0-1], rows[4*(w+4)-1]
	C.wino_dy(fp(dy), fp(m), C.int(co), C.int(n), C.int(h), C.int(w), C.long(t0), C.long(t1), C.int(ld), fp(rows))
}

// Weights4 writes U = G·g·Gᵀ of F(4×4, 3×3) for output channels
// [o0, o1).
func Weights4(g, u []float32, co, ci, o0, o1 int) {
	if o0 < 0 || o1 > co || o0 >= o1 {
		return
	}
	_, _ = g[co*ci*9-1], u[36*co*ci-1]
	C.wino4_wt(fp(g), fp(u), C.int(co), C.int(ci), C.int(o0), C.int(o1))
}

// WeightGrad4 adds Gᵀ·dU·G of F(4×4, 3×3) into dw.
func WeightGrad4(du, dw []float32, co, ci int) {
	_, _ = du[36*co*ci-1], dw[co*ci*9-1]
	C.wino4_wgrad(fp(du), fp(dw), C.int(co), C.int(ci))
}

// In4 writes Bᵀ·d·B of F(4×4, 3×3) for tiles [t0, t1) of x into v; rows
// holds 6·(w+6) values.
func In4(x, v []float32, ci, n, h, w, t0, t1, ld int, rows []float32) {
	_, _, _ = x[ci*n*h*w-1], v[35*ci*ld+(ci-1)*ld+t1-t0-1], rows[6*(w+6)-1]
	C.wino4_in(fp(x), fp(v), C.int(ci), C.int(n), C.int(h), C.int(w), C.long(t0), C.long(t1), C.int(ld), fp(rows))
}

// Out4 writes y = Aᵀ·m·A + beta·y of F(4×4, 3×3) for tiles [t0, t1);
// rows holds 4·(w+6) values.
func Out4(m, y []float32, co, n, h, w, t0, t1, ld int, beta float32, rows []float32) {
	_, _, _ = y[co*n*h*w-1], m[35*co*ld+(co-1)*ld+t1-t0-1], rows[4*(w+6)-1]
	C.wino4_out(fp(m), fp(y), C.int(co), C.int(n), C.int(h), C.int(w), C.long(t0), C.long(t1), C.int(ld), C.float(beta), fp(rows))
}

// Dy4 writes A·dy·Aᵀ of F(4×4, 3×3) for tiles [t0, t1) of dy into m;
// rows holds 6·(w+6) values.
func Dy4(dy, m []float32, co, n, h, w, t0, t1, ld int, rows []float32) {
	_, _, _ = dy[co*n*h*w-1], m[35*co*ld+(co-1)*ld+t1-t0-1], rows[6*(w+6)-1]
	C.wino4_dy(fp(dy), fp(m), C.int(co), C.int(n), C.int(h), C.int(w), C.long(t0), C.long(t1), C.int(ld), fp(rows))
}
