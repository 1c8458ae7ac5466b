package torch

import (
	"fmt"
	"slices"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// What the torch engine knows of the host, and the worker's process on
// the CPU, as the planner asks through the descriptor (cost.HostProber,
// cost.Processor).

// HostFacts is what the torch engine measures of this machine for its
// workers on the CPU (cost.Host.Own).
type HostFacts struct {
	// Allocator is the malloc the workers on the CPU run with
	// (TCMalloc), "" for the C library's (CPUAllocator).
	Allocator string
	// OneDNNOff says the workers on the CPU run with oneDNN turned off
	// (a test hook, OneDNNOff).
	OneDNNOff bool
	// OneDNNMaxISA is the workers' ONEDNN_MAX_CPU_ISA, lowercased, ""
	// where not set (OneDNNMaxISA): it caps the kernels oneDNN may take,
	// AMX's among them.
	OneDNNMaxISA string
}

// ProbeHost implements cost.HostProber.
func (Cost) ProbeHost() cost.Host {
	alloc, _ := CPUAllocator()
	return cost.Host{GraphsOff: GraphOff(), Own: HostFacts{Allocator: alloc, OneDNNOff: OneDNNOff(), OneDNNMaxISA: OneDNNMaxISA()}}
}

// hostFacts is the torch engine's own facts in h, zero where none.
func hostFacts(h cost.Host) HostFacts {
	f, _ := h.Own.(HostFacts)
	return f
}

// CPUSetup is what the torch engine's kernels on the CPU are chosen by
// beyond the graph: the host's vector extensions and whether the worker
// runs oneDNN. PyTorch runs a conv with oneDNN or with its slow path
// (im2col columns and a GEMM) by these (engine/torch/cost_onednn.go).
type CPUSetup struct {
	// AVX512 is AVX512F, BW, VL and DQ together: oneDNN's avx512_core
	// and PyTorch 1.13's bf16 check (avx512bw, avx512vl, avx512dq).
	AVX512 bool
	// AVX2VNNI2 is AVX2 with AVX-VNNI and AVX-VNNI-INT8 (oneDNN's
	// avx2_vnni_2, which also needs AVX-NE-CONVERT: every such CPU so
	// far has it), which PyTorch 2.x's bf16 check also accepts.
	AVX2VNNI2 bool
	// OneDNNOff says the worker runs with oneDNN turned off
	// (torch.backends.mkldnn.enabled = False; a test hook).
	OneDNNOff bool
	// TorchVersion is the worker's PyTorch ("1.13.1", "2.11.0"), ""
	// where not known: then 1.13's rules, the CPU workers' version.
	TorchVersion string
	// AMX is AMX-BF16 with its tiles usable (the OS lets a process have
	// them) and oneDNN's ISA cap (ONEDNN_MAX_CPU_ISA) permitting them:
	// oneDNN then runs bf16 convs on its AMX kernels, whose weight
	// gradient holds transposed copies the other paths do not.
	AMX bool
	// MaxISA is the worker's ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA),
	// lowercased, "" where not set.
	MaxISA string
	// Threads is the worker's compute threads (oneDNN's), which its AMX
	// weight-gradient kernel splits the batch over; 0 where not known.
	Threads int
}

// oneDNNNoAMX are the ONEDNN_MAX_CPU_ISA values (v2.6 and 3.x) that cap
// oneDNN below its AMX kernels; "all", the AMX ones and any value oneDNN
// does not know (which it ignores) leave them on.
var oneDNNNoAMX = []string{"sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2", "avx512_core",
	"avx512_core_vnni", "avx512_core_bf16", "avx512_core_fp16", "avx10_1_512", "avx10_2_512"}

// cpuSetup is what the CPU kernels are chosen by under s; nil where the
// device is not the CPU or nothing is known of the host (then the cost
// model prices oneDNN, as on a CPU with AVX-512).
func cpuSetup(s cost.Setup) *CPUSetup {
	h, f := hostFacts(s.Host), s.HostCPU
	if s.Device != plan.BackendCPU || (!f.Known && !h.OneDNNOff) {
		return nil
	}
	avx512 := f.AVX512F && f.AVX512BW && f.AVX512VL && f.AVX512DQ
	return &CPUSetup{
		AVX512:       avx512,
		AVX2VNNI2:    f.AVX2 && f.AVXVNNI && f.AVXVNNIInt8,
		OneDNNOff:    h.OneDNNOff,
		TorchVersion: s.Host.Version,
		AMX:          avx512 && f.AMXTile && f.AMXBF16 && !slices.Contains(oneDNNNoAMX, h.OneDNNMaxISA),
		MaxISA:       h.OneDNNMaxISA,
		Threads:      s.Threads,
	}
}

// CPURuntime is the worker's resident memory once PyTorch is imported,
// before any model: a calibration, Debian 12's PyTorch 1.13 (CPU), the
// worker at its hello measured at 228 MiB with the C library's malloc
// (VmRSS; a bare import torch takes 226, the worker's own modules 2
// more) and the first step's kernels and thread pool at 9 MiB more,
// rounded up. A plan on the CPU counts it, so that its total is the
// worker's peak resident memory, which the run reports beside it; other
// PyTorch builds differ (a CUDA build maps far more), which the report's
// error shows.
const CPURuntime = 238 << 20

// TCMallocRuntime is what tcmalloc adds to the worker's runtime: the same
// worker at its hello measured at 235 MiB against 228 with the C
// library's malloc (VmRSS). tcmalloc keeps what import churns through in
// its page heap and per-size caches and never gives it back (its heap
// then holds 70 MiB, 4 to 5 more than is allocated, by its
// MallocExtension counters), and it adds its own metadata.
const TCMallocRuntime = 7 << 20

// Process implements cost.Processor: the worker's runtime, named by the
// allocator whose peak the plan is (the step's with tcmalloc; glibc's
// malloc keeps freed tensors, which the plan does not price:
// docs/design/torch-cpu-allocator.md), and the state it writes each
// checkpoint into.
func (Cost) Process(s cost.ProcessSetup) cost.Process {
	p := cost.Process{Runtime: CPURuntime}
	alloc := "the worker allocates with tcmalloc, which reuses the pages of the tensors a step frees, so its peak is the step's"
	switch hostFacts(s.Host).Allocator {
	case "":
		alloc = "the worker allocates with the C library's malloc, priced as if it reused freed tensors' pages: glibc keeps them (its mmap threshold rises to the largest block freed), so the measured peak may pass the plan by up to a third; with tcmalloc's library installed (Debian's libtcmalloc-minimal4) the engine preloads it"
	case TCMalloc:
		p.Runtime = cost.Add(p.Runtime, TCMallocRuntime)
		alloc += fmt.Sprintf(", and holds %s of its own (its caches and metadata, measured)", cost.FormatBytes(TCMallocRuntime))
	}
	note := fmt.Sprintf("the torch worker's runtime %s: PyTorch's libraries once imported and at work, a calibration of Debian's PyTorch 1.13 (CPU); %s", cost.FormatBytes(p.Runtime), alloc)
	note += fmt.Sprintf("; input batches: the worker reads %d of them in turn from memory it shares with pipe, whose pages stay resident in it", slots)
	if s.Checkpoints {
		p.Checkpoint = cost.Add(cost.Add(cost.Mul(s.Params, 4), s.Optimizer), batchnormStats(s.Graph))
		note += fmt.Sprintf("; checkpoint copy %s: the worker writes the model's state (fp32 parameters, batchnorm statistics, optimizer state) into memory it shares with pipe, whose pages stay resident in it", cost.FormatBytes(p.Checkpoint))
	}
	p.Note = note + "; the dataset stays in pipe's own process, which sends the worker its batches"
	return p
}

// batchnormStats is the bytes of g's batchnorms' running means and
// variances, fp32: the state a checkpoint holds beside the parameters
// and the optimizer's buffers.
func batchnormStats(g *stdlib.Graph) int64 {
	var n int64
	for _, nd := range g.Nodes {
		if nd.Op == "batchnorm" && len(nd.Out) > 0 {
			n = cost.Add(n, cost.Mul(8, nd.Out[0]))
		}
	}
	return n
}
