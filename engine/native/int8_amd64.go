package native

import "golang.org/x/sys/cpu"

// hasVNNI says this CPU can run dotVNNI; hasAVX2 (adam_amd64.go)
// dotAVX2. qpath picks between them and dotGo.
var hasVNNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI

//go:noescape
func dotVNNI(a *uint8, lda int, w *int8, k4 int, c *int32, ldc int, tiles int)

//go:noescape
func dotAVX2(a *uint8, lda int, w *int8, k4 int, c *int32, ldc int, tiles int)

//go:noescape
func requantVNNI(c *int32, cop int, groups int, co int, mul, bias *float32, corr *int32, relu int, y *float32, P int)
