package native

import "golang.org/x/sys/cpu"

var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasAVX

//go:noescape
func adamAVX2(p, grad, m1, m2 *float32, n int, k *adamConsts)

// adamVec runs the Adam update over as many values as the vector kernel
// takes and returns how many it did.
func adamVec(p, g, m1, m2 []float32, k *adamConsts) int {
	n := len(p) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	g, m1, m2 = g[:n], m1[:n], m2[:n]
	adamAVX2(&p[0], &g[0], &m1[0], &m2[0], n, k)
	return n
}
