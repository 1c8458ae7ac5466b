package planner

import "pipe/stdlib"

// volScratch is a 3-D convolution's per-worker buffers in the native
// engine (exec/cpu/conv3d.go): the column buffer, whole output planes of
// Ho·Wo columns and Cin·K³ rows, as many planes as fit colBudget and at
// least one (none for a 1×1×1 convolution with stride 1 and no padding),
// and a partial weight gradient of Cout·Cin·K³. in is the convolution's
// input [C, D, H, W] and out its output (a transposed convolution passes
// them swapped: it runs the convolution from its output to its input).
func volScratch(in, out []int64, a stdlib.OpArgs) (col, part int64) {
	k, s, p := a.Kernel, max(a.Stride, 1), a.Padding
	ckk := mul(in[0], mul(k, mul(k, k)))
	part = mul(out[0], ckk)
	if k == 1 && s == 1 && p == 0 && in[1] == out[1] && in[2] == out[2] && in[3] == out[3] {
		return 0, part
	}
	plane := max(mul(ckk, mul(out[2], out[3])), 1)
	return mul(max(1, colBudget/plane), plane), part
}

// hasVolume says whether g has an op on volumes [C, D, H, W] (3-D
// convolutions, pools and upsampling).
func hasVolume(g *stdlib.Graph) bool {
	for _, n := range g.Nodes {
		if len(n.Out) == 4 && n.Op != "input" {
			return true
		}
	}
	return false
}
