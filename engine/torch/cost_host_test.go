package torch

import (
	"testing"

	"pipe/planner/cost"
	"pipe/planner/plan"
)

// TestCPUSetupFromTheHost: on the CPU the engine chooses its kernels by
// the host's AVX-512 (all four sets), avx2_vnni_2, its version and the
// oneDNN hook; on a GPU, or on a host not measured, by nothing.
func TestCPUSetupFromTheHost(t *testing.T) {
	on := func(f cost.CPUFeatures, h cost.Host, dev string) *CPUSetup {
		return cpuSetup(cost.Setup{Device: dev, HostCPU: f, Host: h})
	}
	avx512 := cost.CPUFeatures{Known: true, AVX2: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512DQ: true}
	if s := on(avx512, cost.Host{}, plan.BackendCPU); s == nil || !s.AVX512 || s.AVX2VNNI2 || s.OneDNNOff {
		t.Errorf("AVX-512 host: %+v", s)
	}
	noDQ := avx512
	noDQ.AVX512DQ = false
	if s := on(noDQ, cost.Host{}, plan.BackendCPU); s == nil || s.AVX512 {
		t.Errorf("AVX-512 without DQ: %+v", s)
	}
	vnni2 := cost.CPUFeatures{Known: true, AVX2: true, AVXVNNI: true, AVXVNNIInt8: true}
	if s := on(vnni2, cost.Host{Version: "2.11.0"}, plan.BackendCPU); s == nil || !s.AVX2VNNI2 || s.TorchVersion != "2.11.0" {
		t.Errorf("avx2_vnni_2 host: %+v", s)
	}
	if s := on(cost.CPUFeatures{}, cost.Host{Own: HostFacts{OneDNNOff: true}}, plan.BackendCPU); s == nil || !s.OneDNNOff {
		t.Errorf("oneDNN off: %+v", s)
	}
	if s := on(cost.CPUFeatures{}, cost.Host{}, plan.BackendCPU); s != nil {
		t.Errorf("a host not measured: %+v", s)
	}
	if s := on(avx512, cost.Host{}, plan.BackendGPU); s != nil {
		t.Errorf("a GPU plan: %+v", s)
	}
}

// TestCPUSetupAMX: AMX reaches the kernels' choice where the CPU has
// AVX-512 and AMX's tile and bf16 sets and the worker's
// ONEDNN_MAX_CPU_ISA leaves oneDNN its AMX kernels (unset, "all", an AMX
// one, or a value oneDNN does not know); a cap below them, or a missing
// set, turns it off.
func TestCPUSetupAMX(t *testing.T) {
	spr := cost.CPUFeatures{Known: true, AVX2: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512DQ: true,
		AVXVNNI: true, AMXTile: true, AMXBF16: true, AMXInt8: true}
	for _, c := range []struct {
		name string
		f    func(*cost.CPUFeatures)
		isa  string
		want bool
	}{
		{"unset", nil, "", true},
		{"all", nil, "all", true},
		{"avx512_core_amx", nil, "avx512_core_amx", true},
		{"unknown value", nil, "avx512_core_amx_fp16", true},
		{"avx512_core_bf16", nil, "avx512_core_bf16", false},
		{"avx512_core", nil, "avx512_core", false},
		{"avx2", nil, "avx2", false},
		{"no amx_bf16", func(f *cost.CPUFeatures) { f.AMXBF16 = false }, "", false},
		{"no tiles", func(f *cost.CPUFeatures) { f.AMXTile = false }, "", false},
	} {
		f := spr
		if c.f != nil {
			c.f(&f)
		}
		s := cpuSetup(cost.Setup{Device: plan.BackendCPU, HostCPU: f, Host: cost.Host{Own: HostFacts{OneDNNMaxISA: c.isa}}, Threads: 2})
		if s == nil || s.AMX != c.want || s.MaxISA != c.isa || s.Threads != 2 {
			t.Errorf("%s: %+v, want AMX %v", c.name, s, c.want)
		}
	}
}
