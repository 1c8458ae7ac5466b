package native

import "golang.org/x/sys/cpu"

// hasVNNI says the int8 products run in AVX-512 VNNI assembly
// (int8_amd64.s); elsewhere dotGo computes the same sums.
var hasVNNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI

//go:noescape
func dotVNNI(a *uint8, lda int, w *int8, k4 int, c *int32, ldc int, tiles int)

//go:noescape
func requantVNNI(c *int32, cop int, groups int, co int, mul, bias *float32, corr *int32, relu int, y *float32, P int)
