//go:build !amd64

package native

var (
	hasVNNI = false
	hasAVX2 = false
)

func dotVNNI(a *uint8, lda int, w *int8, k4 int, c *int32, ldc int, tiles int) {
	panic("dotVNNI without amd64")
}

func dotAVX2(a *uint8, lda int, w *int8, k4 int, c *int32, ldc int, tiles int) {
	panic("dotAVX2 without amd64")
}

func requantVNNI(c *int32, cop int, groups int, co int, mul, bias *float32, corr *int32, relu int, y *float32, P int) {
	panic("requantVNNI without amd64")
}
