package planner

import (
	"strings"
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

// TestCPUSetupAMX: AMX reaches the torch engine where the CPU has AVX-512
// and AMX's tile and bf16 sets and the worker's ONEDNN_MAX_CPU_ISA leaves
// oneDNN its AMX kernels (unset, "all", an AMX one, or a value oneDNN
// does not know); a cap below them, or a missing set, turns it off.
func TestCPUSetupAMX(t *testing.T) {
	cpu := plan.Device{Kind: plan.BackendCPU, Cores: 2}
	spr := CPUFeatures{Known: true, AVX2: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512DQ: true,
		AVXVNNI: true, AMXTile: true, AMXBF16: true, AMXInt8: true}
	for _, c := range []struct {
		name string
		f    func(*CPUFeatures)
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
		{"no amx_bf16", func(f *CPUFeatures) { f.AMXBF16 = false }, "", false},
		{"no tiles", func(f *CPUFeatures) { f.AMXTile = false }, "", false},
	} {
		f := spr
		if c.f != nil {
			c.f(&f)
		}
		s := (&planner{host: HostInfo{CPU: f, TorchOneDNNMaxISA: c.isa}, dev: cpu}).cpuSetup()
		if s == nil || s.AMX != c.want || s.MaxISA != c.isa || s.Threads != 2 {
			t.Errorf("%s: %+v, want AMX %v", c.name, s, c.want)
		}
	}
}

// TestTorchCPUPlanPricesAMX: a torch plan on the CPU of an AMX host adds
// the largest conv's AMX weight-gradient scratch to the workspace and the
// total, names the path in a decision and the scratch in the layer table;
// with ONEDNN_MAX_CPU_ISA=avx512_core_bf16 the plan is the AVX-512
// host's, which has no such term.
func TestTorchCPUPlanPricesAMX(t *testing.T) {
	src := `pipeline p
device cpu
precision bf16
source data synthetic { samples 64 shape [1, 128, 128] }
model m {
  input [1, 128, 128]
  e = conv 32 k3 pad1 -> relu
  conv 64 k3 pad1 -> relu -> concat e -> conv 1 k1
}
train { epochs 1  batch 4  optimizer adam lr 1e-3  loss mse }
`
	avx512 := CPUFeatures{Known: true, AVX2: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512DQ: true}
	spr := avx512
	spr.AMXTile, spr.AMXBF16, spr.AMXInt8 = true, true, true
	planOn := func(f CPUFeatures, isa string) *plan.Plan {
		t.Helper()
		h := testHost
		h.CPU, h.TorchOneDNNMaxISA = f, isa
		p, ds := planSrc(t, src, WithHost(h), WithEngine("torch"))
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		return p
	}
	path := func(p *plan.Plan) string {
		for _, d := range p.Decisions {
			if d.What == "conv path" {
				return d.Value
			}
		}
		return ""
	}
	base, capped, amx := planOn(avx512, ""), planOn(spr, "avx512_core_bf16"), planOn(spr, "")
	if capped.Memory.Total != base.Memory.Total || capped.Memory.Workspace != base.Memory.Workspace || path(capped) != "oneDNN" || path(base) != "oneDNN" {
		t.Errorf("capped AMX host: total %d against %d, path %q", capped.Memory.Total, base.Memory.Total, path(capped))
	}
	var largest int64
	for _, l := range amx.Layers {
		if l.Op == "conv" && (l.WorkspaceBytes <= 0 || !strings.Contains(l.Workspace, "AMX")) {
			t.Errorf("%s: workspace %d %q", l.Name, l.WorkspaceBytes, l.Workspace)
		}
		largest = max(largest, l.WorkspaceBytes)
	}
	if amx.BatchSize != base.BatchSize || path(amx) != "oneDNN AMX" {
		t.Fatalf("AMX host: batch %d against %d, path %q", amx.BatchSize, base.BatchSize, path(amx))
	}
	if d := amx.Memory.Total - base.Memory.Total; d != largest || amx.Memory.Workspace-base.Memory.Workspace != largest {
		t.Errorf("AMX host: total %d more, workspace %d more, want the largest conv's scratch %d",
			d, amx.Memory.Workspace-base.Memory.Workspace, largest)
	}
}
