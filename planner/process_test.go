package planner

import (
	"strings"
	"testing"

	"pipe/engine/torch"
	"pipe/planner/cost"
)

// TestTorchCPUPlanNamesItsAllocator: a torch plan on the CPU says which
// malloc its worker's peak is priced for, counts tcmalloc's own memory
// where it is the worker's, the worker's three input slots, and the state
// the worker writes each checkpoint into, fp32 whatever the precision,
// unless the run saves none.
func TestTorchCPUPlanNamesItsAllocator(t *testing.T) {
	src := func(save string) string {
		return `pipeline p
device cpu
source data synthetic { samples 1000 shape [1] classes 10 }
model m {
  input [3, 32, 32]
  conv 16 k3 pad1 -> batchnorm -> relu -> gap -> dense 10
}
train { epochs 1  batch 8  optimizer adam lr 1e-3  loss cross_entropy  ` + save + ` }
`
	}
	var runtime, input, k int64
	process := func(h HostInfo, save string) (string, int64, int64) {
		t.Helper()
		p, ds := planSrc(t, src(save), WithHost(h), WithEngine("torch"))
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		runtime, input, k = p.Memory.Runtime, p.Memory.Input, p.StepsPerCommand
		for _, d := range p.Decisions {
			if d.What == "process" {
				return d.Reason, p.Memory.Checkpoint, p.Parameters
			}
		}
		t.Fatal("no process decision")
		return "", 0, 0
	}
	tc := testHost.WithEngineHost("torch", cost.Host{Own: torch.HostFacts{Allocator: torch.TCMalloc}})
	why, ckpt, params := process(tc, "")
	if !strings.Contains(why, "allocates with tcmalloc") {
		t.Errorf("with tcmalloc: %s", why)
	}
	if runtime != torch.CPURuntime+torch.TCMallocRuntime {
		t.Errorf("with tcmalloc: runtime %d bytes, want %d", runtime, torch.CPURuntime+torch.TCMallocRuntime)
	}
	// Three slots of k batches of 8 samples (a unit of k steps lies in
	// a slot): the fp32 image and an int64 label each.
	if want := 3 * k * 8 * (4*3*32*32 + 8); k < 1 || input != want {
		t.Errorf("input batches %d bytes at %d steps a command, want %d", input, k, want)
	}
	// Parameters and adam's two buffers, fp32, and the batchnorm's
	// running mean and variance.
	if want := 4*3*params + 8*16; ckpt != want {
		t.Errorf("checkpoint copy %d bytes, want %d", ckpt, want)
	}
	why, _, _ = process(testHost, "")
	if !strings.Contains(why, "C library's malloc") || !strings.Contains(why, "libtcmalloc-minimal4") {
		t.Errorf("without tcmalloc: %s", why)
	}
	if runtime != torch.CPURuntime {
		t.Errorf("without tcmalloc: runtime %d bytes, want %d", runtime, torch.CPURuntime)
	}
	if _, ckpt, _ := process(tc, "save none"); ckpt != 0 {
		t.Errorf("save none: checkpoint copy %d bytes", ckpt)
	}
}
