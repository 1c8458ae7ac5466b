package cost

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
