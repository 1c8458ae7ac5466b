package torch

import (
	"pipe/planner/cost"
	"pipe/stdlib"
)

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

// onednnWork is each conv's copies per sample on the CPU: its input and
// its output's gradient at the precision of the product (low bytes per
// element); 0 for every other node.
func onednnWork(g *stdlib.Graph, low int64) []int64 {
	w := make([]int64, len(g.Nodes))
	for _, nd := range g.Nodes {
		if nd.Op != "conv" || len(nd.In) == 0 {
			continue
		}
		w[nd.ID] = cost.Mul(cost.Add(cost.Numel(nd.In[0]), cost.Numel(nd.Out)), low)
	}
	return w
}
