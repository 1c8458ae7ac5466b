//go:build !cgo

package cvec

// Built says this build has the C loops: without cgo it has not, and
// package native runs its Go loops.
const Built = false

func Max2x2Planes(src, dst []float32, ix []int32, w, h, ho, wo, n int) {
	panic("cvec: built without cgo")
}
func AffineRelu(dst, src []float32, a, b float32) { panic("cvec: built without cgo") }
func Gelu(dst, src []float32, c1 float32)         { panic("cvec: built without cgo") }
func GeluGrad(g, x []float32, c1, c2 float32)     { panic("cvec: built without cgo") }
func ExpSub(dst, x []float32, sub float32)        { panic("cvec: built without cgo") }
func BnDx(dx, g, x, out []float32, mean, k, fn, sg, xk float32, relu, acc bool) {
	panic("cvec: built without cgo")
}
func Sum64(x []float32) float64               { panic("cvec: built without cgo") }
func SumSqDev(x []float32, m float32) float64 { panic("cvec: built without cgo") }
func SumCentered(g, x, out []float32, mean float32, relu bool) (sg, sgx float64) {
	panic("cvec: built without cgo")
}
func Max2x2PlanesEval(src, dst []float32, w, h, ho, wo, n int) { panic("cvec: built without cgo") }
func UseMax2x2Eval(isa int) bool                               { return false }
func UseMax2x2(isa int) bool                                   { return false }
func QuantU8(dst []uint8, src []float32, inv float32, lo, hi, zero int32) {
	panic("cvec: built without cgo")
}
func QuantNHWC(xq []uint8, x []float32, pix, ci, p0, p1 int, inv float32, lo, hi, zero int32) {
	panic("cvec: built without cgo")
}
func RequantT(y []float32, P int, c []int32, cop, rows, co int, mul, bias []float32, corr []int32, relu bool) {
	panic("cvec: built without cgo")
}
func RequantRow(dst []float32, c []int32, mul, bias []float32, corr []int32, relu bool) {
	panic("cvec: built without cgo")
}
func MaxOf4Rows(c []int32, m, co, ldc int) { panic("cvec: built without cgo") }
