//go:build cgo

// Package cvec holds loops of package cpu written in C, so that the
// compiler vectorises them (Go does not), where profiles showed the Go
// loop to matter; each computes exactly what the Go loop beside it in
// package cpu computes, and a test there holds them equal. It is apart
// from package cpu because a package with cgo cannot also hold Go
// assembly.
package cvec

/*
#cgo CFLAGS: -O3
#include "cvec.h"
*/
import "C"

import "unsafe"

// Built says this build has the C loops; without cgo it has not.
const Built = true

// Max2x2 is cpu.max2x2 (pool2d.go) on one plane.
func Max2x2(src, dst []float32, ix []int32, w, ho, wo int) {
	if ho == 0 || wo == 0 {
		return
	}
	_, _, _ = src[(2*ho-1)*w+2*wo-1], dst[ho*wo-1], ix[ho*wo-1]
	C.max2x2((*C.float)(unsafe.Pointer(unsafe.SliceData(src))), (*C.float)(unsafe.Pointer(unsafe.SliceData(dst))),
		(*C.int)(unsafe.Pointer(unsafe.SliceData(ix))), C.int(w), C.int(ho), C.int(wo))
}
