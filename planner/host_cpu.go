package planner

import (
	"runtime"

	"golang.org/x/sys/cpu"
)

// detectCPU reads the host's vector extensions from CPUID (x/sys/cpu,
// which also checks that the OS saves the wide registers).
func detectCPU() CPUFeatures {
	if runtime.GOARCH != "amd64" {
		return CPUFeatures{}
	}
	x := cpu.X86
	tiles := x.HasAMXTile && osTiles()
	return CPUFeatures{Known: true, AVX2: x.HasAVX2,
		AVX512F: x.HasAVX512F, AVX512BW: x.HasAVX512BW, AVX512VL: x.HasAVX512VL, AVX512DQ: x.HasAVX512DQ,
		AVXVNNI: x.HasAVXVNNI, AVXVNNIInt8: x.HasAVXVNNIInt8,
		AMXTile: tiles, AMXBF16: tiles && x.HasAMXBF16, AMXInt8: tiles && x.HasAMXInt8}
}
