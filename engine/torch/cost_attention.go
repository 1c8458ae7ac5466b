package torch

// attnPath is the implementation nn.MultiheadAttention's training forward
// takes in the worker's torch (F.multi_head_attention_forward, need_weights
// False, as the worker calls it), and why. A fused path (flash, memory-
// efficient, cuDNN's, or the CPU's flash kernel) keeps per-row softmax
// statistics for the backward; the math path keeps the heads × tokens²
// probabilities. Derivation and sources: docs/design/gpu-memory.md.
type attnPath struct {
	name  string // "flash", "memory-efficient", "flash (CPU)" or "math"
	fused bool
	// why is the rule that picks it, after the torch version it is for
	// (or that the version is not known).
	why string
}

// attentionPath picks the path for torch version ver ("" when not known
// at planning), on a CUDA GPU of compute capability capability or the
// CPU, products in a 16-bit type (low) or not, with an attention mask
// (causal) and dropout on the probabilities or not. The rules are
// PyTorch's sdp_utils.cpp (CUDA) and sdp_utils_cpp.cpp (CPU) of each
// version.
func attentionPath(ver string, gpu bool, capability string, low, masked, dropout bool) attnPath {
	src := "torch " + ver
	if ver == "" {
		if !gpu {
			return attnPath{name: "math", why: "torch not known when planning: the math path, the larger price (pipe run prices it by its worker's torch)"}
		}
		// The GPU machines run PyTorch 2.x; a run prices it by the
		// worker's own torch once it has started.
		ver, src = AssumedGPUTorch, "torch not known when planning, taken as "+AssumedGPUTorch+", the GPU machines' (pipe run prices it by its worker's torch)"
	}
	from := func(major, minor int) bool { return versionAtLeast(ver, [3]int{major, minor, 0}) }
	math := func(why string) attnPath { return attnPath{name: "math", why: src + "; " + why} }
	fused := func(name, why string) attnPath { return attnPath{name: name, fused: true, why: src + "; " + why} }
	if !gpu {
		switch {
		case !from(2, 2):
			return math("scaled_dot_product_attention has no fused CPU kernel before 2.2")
		case dropout:
			return math("the CPU's flash kernel takes no dropout")
		case masked && !from(2, 3):
			return math("2.2's CPU flash kernel takes no attention mask")
		}
		return fused("flash (CPU)", "the CPU's flash kernel, from 2.2 (no dropout; masks from 2.3)")
	}
	sm80 := versionAtLeast(capability, [3]int{8, 0, 0}) // a compute capability reads as a version
	switch {
	case !from(2, 0):
		return math("before 2.0, F.multi_head_attention_forward runs softmax(q·kᵀ)·v op by op")
	case !from(2, 1) && masked:
		return math("2.0's fused kernels take no attention mask")
	case !from(2, 1) && dropout && !(low && sm80):
		return math("2.0's memory-efficient kernel takes no dropout, and flash needs fp16 or bf16 on sm80 or later")
	case low && sm80 && !masked:
		return fused("flash", "flash takes fp16 or bf16 on sm80 or later without a mask (cuDNN's kernel, which 2.5 and later may pick, keeps the same per-row statistics)")
	}
	return fused("memory-efficient", "the memory-efficient kernel takes any dtype, and masks and dropout from 2.1")
}
