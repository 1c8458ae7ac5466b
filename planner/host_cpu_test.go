package planner

import (
	"testing"

	"pipe/planner/plan"
)

// TestCPUSetupFromTheHost: a plan on the CPU tells the torch engine the
// host's AVX-512 (all four sets), avx2_vnni_2 and the oneDNN hook; a GPU
// plan, or a host not measured, tells it nothing.
func TestCPUSetupFromTheHost(t *testing.T) {
	cpu := plan.Device{Kind: plan.BackendCPU}
	avx512 := CPUFeatures{Known: true, AVX2: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512DQ: true}
	if s := (&planner{host: HostInfo{CPU: avx512}, dev: cpu}).cpuSetup(); s == nil || !s.AVX512 || s.AVX2VNNI2 || s.OneDNNOff {
		t.Errorf("AVX-512 host: %+v", s)
	}
	noDQ := avx512
	noDQ.AVX512DQ = false
	if s := (&planner{host: HostInfo{CPU: noDQ}, dev: cpu}).cpuSetup(); s == nil || s.AVX512 {
		t.Errorf("AVX-512 without DQ: %+v", s)
	}
	vnni2 := CPUFeatures{Known: true, AVX2: true, AVXVNNI: true, AVXVNNIInt8: true}
	if s := (&planner{host: HostInfo{CPU: vnni2, TorchVersion: "2.11.0"}, dev: cpu}).cpuSetup(); s == nil || !s.AVX2VNNI2 || s.TorchVersion != "2.11.0" {
		t.Errorf("avx2_vnni_2 host: %+v", s)
	}
	if s := (&planner{host: HostInfo{TorchOneDNNOff: true}, dev: cpu}).cpuSetup(); s == nil || !s.OneDNNOff {
		t.Errorf("oneDNN off: %+v", s)
	}
	if s := (&planner{host: HostInfo{}, dev: cpu}).cpuSetup(); s != nil {
		t.Errorf("a host not measured: %+v", s)
	}
	if s := (&planner{host: HostInfo{CPU: avx512}, dev: plan.Device{Kind: plan.BackendGPU}}).cpuSetup(); s != nil {
		t.Errorf("a GPU plan: %+v", s)
	}
}
