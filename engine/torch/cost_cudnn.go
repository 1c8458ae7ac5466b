package torch

import (
	"fmt"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// cuDNN's workspace per convolution, from its shapes and the algorithm
// families cuDNN offers for it. Derivation: docs/design/gpu-memory.md
// ("The cuDNN workspace").

// fftTile is the tile of cuDNN's FFT_TILING algorithms (32 × 32), whose
// transforms are 32 × 17 complex values a channel (a real FFT keeps
// half the spectrum plus one).
const fftTile = 32

// convWorkspace is one convolution's largest workspace: fixed bytes and
// bytes per sample, and which algorithm family needs them.
type convWorkspace struct {
	id        int
	name      string
	fixed     int64
	perSample int64
	algo      string
}

// at is the workspace at batch b, held to cap.
func (c convWorkspace) at(b, cap int64) int64 {
	return min(cap, cost.Add(c.fixed, cost.Mul(b, c.perSample)))
}

// convWorkspaces lists, per conv and convtranspose of g, the largest
// workspace of the algorithms cuDNN offers for it: the explicit GEMM's
// column buffer (every shape but 1×1 stride 1, which is a plain GEMM),
// and for 2-D stride-1 kernels larger than 1 the FFT_TILING transforms
// of input, output and filter. elem is the compute precision's bytes.
func convWorkspaces(g *stdlib.Graph, elem int64) []convWorkspace {
	var out []convWorkspace
	for _, n := range g.Nodes {
		if (n.Op != "conv" && n.Op != "convtranspose") || len(n.In) == 0 || len(n.In[0]) < 3 {
			continue
		}
		in, o := n.In[0], n.Out
		k, stride := max(n.Args.Kernel, 1), max(n.Args.Stride, 1)
		cin, cout := in[0], o[0]
		spatial := in[1:] // the side the columns are laid over: the input's for a transposed conv
		if n.Op == "conv" {
			spatial = o[1:]
		}
		taps := int64(1)
		for range len(spatial) {
			taps = cost.Mul(taps, k)
		}
		w := convWorkspace{id: n.ID, name: n.Name, algo: "no workspace (a 1×1 stride-1 conv is a plain GEMM)"}
		if k > 1 || stride > 1 {
			cols := cost.Mul(cost.Mul(cin, taps), cost.Numel(spatial))
			if n.Op == "convtranspose" {
				cols = cost.Mul(cost.Mul(cout, taps), cost.Numel(spatial))
			}
			w.perSample, w.algo = cost.Mul(cols, elem), "GEMM's column buffer"
		}
		if len(in) == 3 && stride == 1 && k > 1 && k < fftTile {
			step := fftTile - k + 1
			tiles := ceilDiv(in[1], step) * ceilDiv(in[2], step)
			spectrum := int64(fftTile * (fftTile/2 + 1) * 8) // complex64 values of one channel's tile
			per := cost.Mul(cost.Mul(cin+cout, tiles), spectrum)
			fixed := cost.Mul(cost.Mul(cin, cout), spectrum)
			if cost.Add(fixed, per) > cost.Add(w.fixed, w.perSample) {
				w.fixed, w.perSample, w.algo = fixed, per, "FFT_TILING's transforms"
			}
		}
		out = append(out, w)
	}
	return out
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// layerWorkspaces is each conv's workspace by node ID, for the plan's
// layers: the term (cudnnTerm) holds the largest of them.
func (gm *gpuTerms) layerWorkspaces(g *stdlib.Graph) []cost.Workspace {
	if len(gm.convWS) == 0 {
		return nil
	}
	out := make([]cost.Workspace, len(g.Nodes))
	for _, c := range gm.convWS {
		out[c.id] = cost.Workspace{Fixed: c.fixed, PerSample: c.perSample, Cap: gm.cudnnCap, Basis: "cuDNN: " + c.algo}
	}
	return out
}

// cudnnTerm is the workspace term at batch b: the largest convolution's,
// since one runs at a time and the caching allocator reuses the block.
func (gm *gpuTerms) cudnnTerm(b int64, text bool) cost.Term {
	var most convWorkspace
	var bytes int64
	for _, c := range gm.convWS {
		if v := c.at(b, gm.cudnnCap); v > bytes || most.name == "" {
			most, bytes = c, v
		}
	}
	t := cost.Term{Name: "cuDNN workspace", Bytes: bytes, Sizes: []int64{bytes}, Phases: cost.InForward | cost.InBackward,
		Source: plan.SourceFormula, Capped: true}
	if text {
		capped := ""
		if bytes == gm.cudnnCap {
			capped = ", held to the cap"
		}
		t.Basis = fmt.Sprintf("the largest of one conv's workspaces, %s's (%s)%s: the largest algorithm family cuDNN offers for each conv's shape "+
			"(GEMM's column buffer, FFT_TILING's 32×32 transforms for stride-1 2-D kernels); cudnn.benchmark's choice takes at most that, "+
			"and CUDNN_CONV_WSCAP_DBG, which the engine sets, caps any at %s (a bound stated apart)",
			most.name, most.algo, capped, cost.FormatBytes(gm.cudnnCap))
	}
	return t
}
