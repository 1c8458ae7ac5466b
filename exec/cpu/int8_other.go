//go:build !amd64

package cpu

const hasVNNI = false

func dotVNNI(a *uint8, lda int, w *int8, k4 int, c *int32, ldc int, tiles int) {
	panic("dotVNNI without amd64")
}
