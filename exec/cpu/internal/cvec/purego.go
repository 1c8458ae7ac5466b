//go:build !cgo

package cvec

// Built says this build has the C loops: without cgo it has not, and
// package cpu runs its Go loops.
const Built = false

func Max2x2(src, dst []float32, ix []int32, w, ho, wo int) { panic("cvec: built without cgo") }
