//go:build !cgo

package winograd

// Built says this build has the transforms: without cgo it has not, and
// package native runs every convolution through im2col.
const Built = false

func Weights(g, u []float32, co, ci, o0, o1 int) { panic("winograd: built without cgo") }
func WeightGrad(du, dw []float32, co, ci int)    { panic("winograd: built without cgo") }
func In(x, v []float32, ci, n, h, w, t0, t1, ld int, rows []float32) {
	panic("winograd: built without cgo")
}
func Out(m, y []float32, co, n, h, w, t0, t1, ld int, beta float32, rows []float32) {
	panic("winograd: built without cgo")
}
func Dy(dy, m []float32, co, n, h, w, t0, t1, ld int, rows []float32) {
	panic("winograd: built without cgo")
}
func Weights4(g, u []float32, co, ci, o0, o1 int) { panic("winograd: built without cgo") }
func WeightGrad4(du, dw []float32, co, ci int)    { panic("winograd: built without cgo") }
func In4(x, v []float32, ci, n, h, w, t0, t1, ld int, rows []float32) {
	panic("winograd: built without cgo")
}
func Out4(m, y []float32, co, n, h, w, t0, t1, ld int, beta float32, rows []float32) {
	panic("winograd: built without cgo")
}
func Dy4(dy, m []float32, co, n, h, w, t0, t1, ld int, rows []float32) {
	panic("winograd: built without cgo")
}
