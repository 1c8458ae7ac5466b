package planner

import (
	"runtime"

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
	return CPUFeatures{Known: true, AVX2: x.HasAVX2,
		AVX512F: x.HasAVX512F, AVX512BW: x.HasAVX512BW, AVX512VL: x.HasAVX512VL, AVX512DQ: x.HasAVX512DQ,
		AVXVNNI: x.HasAVXVNNI, AVXVNNIInt8: x.HasAVXVNNIInt8}
}

// cpuSetup is what the torch engine's CPU kernels are chosen by on this
// host; nil where the device is not the CPU or nothing is known of the
// host (then the engine prices oneDNN, as on a CPU with AVX-512).
func (pl *planner) cpuSetup() *cost.CPUSetup {
	h := pl.host
	if pl.dev.Kind != plan.BackendCPU || (!h.CPU.Known && !h.TorchOneDNNOff) {
		return nil
	}
	f := h.CPU
	return &cost.CPUSetup{
		AVX512:       f.AVX512F && f.AVX512BW && f.AVX512VL && f.AVX512DQ,
		AVX2VNNI2:    f.AVX2 && f.AVXVNNI && f.AVXVNNIInt8,
		OneDNNOff:    h.TorchOneDNNOff,
		TorchVersion: h.TorchVersion,
	}
}
