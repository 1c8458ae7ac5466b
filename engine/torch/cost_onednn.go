package torch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"pipe/planner/cost"
	"pipe/stdlib"
)

// A conv's kernels on the CPU. PyTorch picks them in
// ConvParams::use_mkldnn (aten/src/ATen/native/Convolution.cpp, 1.13 and
// 2.x): oneDNN (mkldnn_convolution) when oneDNN is on and
//   - fp32: always for the plan's convs (not transposed; a 1×1, stride-1
//     conv with a batch under 16 goes slow only on one thread, and the
//     worker runs one per core);
//   - bf16: only where mkldnn_bf16_device_check() passes. In 1.13 that is
//     cpuinfo's avx512bw, avx512vl and avx512dq (native/mkldnn/Utils.h);
//     in 2.x ideep::has_bf16_type_support(), oneDNN's ISA at least
//     avx512_core (the same four AVX-512 sets) or avx2_vnni_2.
// Otherwise select_conv_backend takes the slow path: Slow2d (im2col and
// a GEMM, ConvolutionMM2d.cpp), Slow3d (vol2col, ConvolutionMM3d.cpp) or
// SlowDilated2d/3d. The two paths hold different memory (onednnWork and
// slowWork); a plan that knows nothing of the host prices oneDNN.

// convOneDNN says whether oneDNN runs a conv computed in low bytes per
// element on the CPU setup s (nil: not known, oneDNN).
func convOneDNN(s *CPUSetup, low int64) bool {
	switch {
	case s == nil:
		return true
	case s.OneDNNOff:
		return false
	case low == 4:
		return true
	}
	return s.AVX512 || (s.AVX2VNNI2 && torchMajor(s.TorchVersion) >= 2)
}

// convPath names the kernels g's convs run on on the CPU setup s, and
// why; "" where s is not known or g has no conv.
func convPath(g *stdlib.Graph, low int64, s *CPUSetup) (string, string) {
	if s == nil || !slices.ContainsFunc(g.Nodes, func(nd *stdlib.Node) bool { return nd.Op == "conv" }) {
		return "", ""
	}
	prec := map[bool]string{true: "bf16", false: "fp32"}[low == 2]
	switch {
	case convAMX(s, low):
		return "oneDNN AMX", "the CPU has AMX-BF16 with its tiles enabled and " + isaCap(s) +
			", so oneDNN runs bf16 convs on its AMX kernels; each conv's weight gradient holds transposed copies of its input and output gradient for the " +
			fmt.Sprint(max(s.Threads, 1)) + " threads' samples (jit_avx512_core_amx_convolution_bwd_weights_t, oneDNN v2.6)"
	case convOneDNN(s, low):
		why := prec + " convs run on oneDNN (mkldnn_convolution), with copies of the input and the output's gradient in its layout"
		if low == 2 && s.AMX {
			why += "; the CPU has AMX but " + isaCap(s) + ", so not its AMX kernels"
		}
		return "oneDNN", why
	case s.OneDNNOff:
		return "slow", "oneDNN is off in the workers, so convs run PyTorch's slow path, im2col columns and a GEMM"
	}
	return "slow", "the CPU fails PyTorch's bf16 oneDNN check (AVX-512 BW, VL and DQ), so bf16 convs run its slow path, im2col columns and a GEMM"
}

// isaCap says what the worker's ONEDNN_MAX_CPU_ISA allows.
func isaCap(s *CPUSetup) string {
	if s.MaxISA == "" {
		return "ONEDNN_MAX_CPU_ISA is not set"
	}
	return "ONEDNN_MAX_CPU_ISA is " + s.MaxISA
}

// torchMajor is a PyTorch version's major number, 1 where not known.
func torchMajor(v string) int {
	m, _, _ := strings.Cut(v, ".")
	if n, err := strconv.Atoi(m); err == nil && n > 0 {
		return n
	}
	return 1
}

// convWork is each conv's memory beyond its output and inputs per sample
// on the CPU, on the path PyTorch takes there: oneDNN's copies or the
// slow path's columns, at the precision of the product (low bytes per
// element); 0 for every other node.
func convWork(g *stdlib.Graph, low int64, s *CPUSetup) []int64 {
	w := make([]int64, len(g.Nodes))
	onednn := convOneDNN(s, low)
	for _, nd := range g.Nodes {
		if nd.Op != "conv" || len(nd.In) == 0 {
			continue
		}
		if onednn {
			w[nd.ID] = onednnWork(nd, low)
		} else {
			w[nd.ID] = slowWork(nd, low)
		}
	}
	return w
}

// oneDNN's copies on the CPU. PyTorch runs a convolution on the CPU with
// oneDNN (mkldnn_convolution and its backward, 2-D and 3-D, on NCHW
// tensors: the CPU plan never turns channels_last on), whose kernels read
// and write blocked layouts (nChw16c): each plain tensor they read is
// reordered into a copy of its own first, and each result is made blocked
// and converted to a plain tensor after. The backward pass computes the
// input's gradient first and keeps it while it computes the weights'
// gradient from reordered copies of the input and of the output's
// gradient: the input's gradient, both copies and the output's gradient
// are live together, besides the saved input. The planner's workspace
// counts an op's output and inputs (here the two gradients); Work adds
// the two copies, at the precision the product is computed in.
// Measured with a posix_memalign probe on PyTorch 1.13 (cells' last 3×3
// conv, batch 4: the bf16 input's gradient, 48 MiB, then its 16 and 48
// MiB copies), docs/design/torch-cpu-allocator.md. Channels are
// counted as they are, not padded to the block (16 on AVX-512, 8 on
// AVX2), and the scratchpad of the bf16 weight-gradient kernel (0.8 to 2
// times the output's gradient, by its blocking) is not priced.

// onednnWork is a conv's copies per sample on oneDNN's path: its input
// and its output's gradient at low bytes per element.
func onednnWork(nd *stdlib.Node, low int64) int64 {
	return cost.Mul(cost.Add(cost.Numel(nd.In[0]), cost.Numel(nd.Out)), low)
}

// The slow path's columns. Slow2d and Slow3d unfold the input into
// columns of (C/groups)·k^d rows by the output's positions, for the whole
// batch at once, in the conv's dtype: the forward allocates them before
// the output and frees them when it returns (input, columns and output
// live together), and the backward unfolds the saved input again for the
// weights' gradient once the input's gradient is allocated (the output's
// gradient, the input's gradient and the columns live together; 3-D
// also unfolds for the input's gradient, the same size). A grouped conv
// runs group by group, each with its share of the columns. A 2-D 1×1
// conv of stride 1 and no padding reads the input as its columns, and
// allocates none; a 3-D one allocates them in the backward only. The
// dilated kernels (SlowDilated2d/3d) unfold one sample at a time, a
// buffer that does not grow with the batch: not priced.
// Measured with a posix_memalign and malloc probe on PyTorch 1.13 with
// oneDNN off (batch 4, 32 channels, 128×128, bf16 and fp32): a 3×3 conv
// to 16 channels allocates 36 MiB of bf16 columns in the forward and
// again in the backward (per-thread frames of 9 MiB for the input's
// gradient freed before them); a 3-D 3×3×3 one 432 MiB twice in its
// backward; a 1×1 none; 4 groups a quarter each; docs/design/
// torch-cpu-allocator.md.

// slowWork is a conv's columns per sample on the slow path, at low bytes
// per element.
func slowWork(nd *stdlib.Node, low int64) int64 {
	a := nd.Args
	k := max(a.Kernel, 1)
	if a.Dilation > 1 && k > 1 {
		return 0
	}
	d := len(nd.Out) - 1 // spatial dimensions
	if d < 1 || len(nd.In[0]) < 1 {
		return 0
	}
	if d == 2 && k == 1 && max(a.Stride, 1) == 1 && a.Padding == 0 {
		return 0
	}
	rows := nd.In[0][0] / max(a.Groups, 1)
	for range d {
		rows = cost.Mul(rows, k)
	}
	positions := cost.Numel(nd.Out[1:])
	return cost.Mul(cost.Mul(rows, positions), low)
}
