package planner

import (
	"runtime"
	"slices"

	"golang.org/x/sys/cpu"

	"pipe/planner/cost"
	"pipe/planner/plan"
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

// oneDNNNoAMX are the ONEDNN_MAX_CPU_ISA values (v2.6 and 3.x) that cap
// oneDNN below its AMX kernels; "all", the AMX ones and any value oneDNN
// does not know (which it ignores) leave them on.
var oneDNNNoAMX = []string{"sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2", "avx512_core",
	"avx512_core_vnni", "avx512_core_bf16", "avx512_core_fp16", "avx10_1_512", "avx10_2_512"}

// cpuSetup is what the torch engine's CPU kernels are chosen by on this
// host; nil where the device is not the CPU or nothing is known of the
// host (then the engine prices oneDNN, as on a CPU with AVX-512).
func (pl *planner) cpuSetup() *cost.CPUSetup {
	h := pl.host
	if pl.dev.Kind != plan.BackendCPU || (!h.CPU.Known && !h.TorchOneDNNOff) {
		return nil
	}
	f := h.CPU
	avx512 := f.AVX512F && f.AVX512BW && f.AVX512VL && f.AVX512DQ
	return &cost.CPUSetup{
		AVX512:       avx512,
		AVX2VNNI2:    f.AVX2 && f.AVXVNNI && f.AVXVNNIInt8,
		OneDNNOff:    h.TorchOneDNNOff,
		TorchVersion: h.TorchVersion,
		AMX:          avx512 && f.AMXTile && f.AMXBF16 && !slices.Contains(oneDNNNoAMX, h.TorchOneDNNMaxISA),
		MaxISA:       h.TorchOneDNNMaxISA,
		Threads:      pl.dev.Cores,
	}
}
