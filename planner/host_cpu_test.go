package planner

import (
	"strings"
	"testing"

	"pipe/engine/torch"
	"pipe/planner/cost"
	"pipe/planner/plan"
)

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
		h := testHost.WithEngineHost("torch", cost.Host{Own: torch.HostFacts{OneDNNMaxISA: isa}})
		h.CPU = f
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
