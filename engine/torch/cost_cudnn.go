package torch

import (
	"fmt"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// cuDNN's workspace per convolution, from its shapes and the algorithm
// families cuDNN offers for it, and where in the step it is taken.
// Derivation: docs/design/gpu-memory.md ("The cuDNN workspace").

// fftTile is the tile of cuDNN's FFT_TILING algorithms (32 × 32), whose
// transforms are 32 × 17 complex values a channel (a real FFT keeps
// half the spectrum plus one).
const fftTile = 32

// convFamily is one algorithm family's workspace for a conv: fixed bytes
// and bytes per sample.
type convFamily struct {
	algo             string
	fixed, perSample int64
}

// convWorkspace is what cuDNN may take for one convolution: the
// families with a workspace that its shape admits (implicit GEMM, which
// every shape admits, takes none).
type convWorkspace struct {
	id   int
	name string
	fams []convFamily
}

// at is the workspace at batch b: the largest family's that is within
// cap, since cuDNN offers no algorithm whose workspace passes
// CUDNN_CONV_WSCAP_DBG; 0 (implicit GEMM) when none is.
func (c convWorkspace) at(b, cap int64) (int64, string) {
	var most int64
	algo := "implicit GEMM, no workspace"
	for _, f := range c.fams {
		v := cost.Add(f.fixed, cost.Mul(b, f.perSample))
		if (cap <= 0 || v <= cap) && v > most {
			most, algo = v, f.algo
		}
	}
	return most, algo
}

// convWorkspaces lists, per conv and convtranspose of g, the algorithm
// families cuDNN offers for it that take a workspace: the explicit
// GEMM's column buffer (every shape but 1×1 stride 1, which is a plain
// GEMM), and for 2-D stride-1 kernels larger than 1, neither dilated nor
// grouped, the FFT_TILING transforms of input, output and filter (cuDNN's
// FFT algorithms take dilation 1 and one group only). elem is the
// compute precision's bytes.
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
		w := convWorkspace{id: n.ID, name: n.Name}
		if k > 1 || stride > 1 {
			cols := cost.Mul(cost.Mul(cin, taps), cost.Numel(spatial))
			if n.Op == "convtranspose" {
				cols = cost.Mul(cost.Mul(cout, taps), cost.Numel(spatial))
			}
			w.fams = append(w.fams, convFamily{algo: "GEMM's column buffer", perSample: cost.Mul(cols, elem)})
		}
		plain := max(n.Args.Dilation, 1) == 1 && max(n.Args.Groups, 1) == 1
		if len(in) == 3 && stride == 1 && k > 1 && k < fftTile && plain {
			step := fftTile - k + 1
			tiles := ceilDiv(in[1], step) * ceilDiv(in[2], step)
			spectrum := int64(fftTile * (fftTile/2 + 1) * 8) // complex64 values of one channel's tile
			w.fams = append(w.fams, convFamily{algo: "FFT_TILING's transforms",
				fixed: cost.Mul(cost.Mul(cin, cout), spectrum), perSample: cost.Mul(cost.Mul(cin+cout, tiles), spectrum)})
		}
		out = append(out, w)
	}
	return out
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// layerWorkspaces is each conv's workspace by node ID, for the plan's
// layers: its largest family whose fixed part is within the cap, held
// to the cap (a family that passes it at a batch is not offered there).
func (gm *gpuTerms) layerWorkspaces(g *stdlib.Graph) []cost.Workspace {
	if len(gm.convWS) == 0 {
		return nil
	}
	out := make([]cost.Workspace, len(g.Nodes))
	for _, c := range gm.convWS {
		w := cost.Workspace{Cap: gm.cudnnCap, Basis: "cuDNN: implicit GEMM, no workspace"}
		for _, f := range c.fams {
			if f.fixed <= gm.cudnnCap && (w.PerSample == 0 && w.Fixed == 0 || f.fixed+f.perSample > w.Fixed+w.PerSample) {
				w.Fixed, w.PerSample, w.Basis = f.fixed, f.perSample, "cuDNN: "+f.algo
			}
		}
		out[c.id] = w
	}
	return out
}

// cudnnTerms are the workspace terms at batch b, one for the forward and
// one for the backward. A conv's workspace is taken while it runs, and
// the largest is cudnn.benchmark's trial buffer at the first step (the
// largest family within the cap); the algorithm it then keeps takes at
// most that, at the same point of the step. So each phase's term is what
// the workspace adds above the phase's other tensors where it is taken:
// in the forward, conv i's workspace less the activations the nodes after
// it have not kept yet; in the backward, the kept activations of the
// nodes up to i, the most activation gradients alive at once and the
// workspace, less the backward peak the other terms price (at most the
// workspace itself). Without the
// per-node activations (a checkpoint plan), the largest workspace whole.
func (gm *gpuTerms) cudnnTerms(s cost.GPUStep) []cost.Term {
	b := s.Batch
	n := len(s.PerNode)
	positioned := s.Act == s.Baseline && n > 0
	after := make([]int64, n+1) // Σ PerNode[k] for k >= i
	for i := n - 1; i >= 0; i-- {
		after[i] = cost.Add(after[i+1], s.PerNode[i])
	}
	live := cost.Sum(s.MaxLiveGrads...)
	peak := cost.Add(s.Saved, cost.Sum(s.Grads...))
	var fwd, bwd, most int64
	var fwdAt, bwdAt, mostAt convWorkspace
	var mostAlgo string
	for _, c := range gm.convWS {
		ws, algo := c.at(b, gm.cudnnCap)
		if ws > most || mostAt.name == "" {
			most, mostAt, mostAlgo = ws, c, algo
		}
		f, bk := ws, ws
		if positioned && c.id < n {
			f = max(0, ws-cost.Mul(after[c.id+1], b))
			upto := after[0] - after[c.id+1]
			bk = min(ws, max(0, cost.Add(cost.Mul(cost.Add(upto, live), b), ws)-cost.Mul(peak, b)))
		}
		if f > fwd {
			fwd, fwdAt = f, c
		}
		if bk > bwd {
			bwd, bwdAt = bk, c
		}
	}
	term := func(name string, bytes int64, ph uint8, at convWorkspace, phase string) cost.Term {
		t := cost.Term{Name: name, Bytes: bytes, Sizes: []int64{bytes}, Phases: ph, Source: plan.SourceFormula, Capped: true}
		if !s.Text {
			return t
		}
		t.Basis = fmt.Sprintf("the largest workspace cuDNN may take, %s's (%s, %s within CUDNN_CONV_WSCAP_DBG's %s, which the engine sets): "+
			"cudnn.benchmark's trial buffer at the first step, and a bound on the algorithm it keeps",
			mostAt.name, mostAlgo, cost.FormatBytes(most), cost.FormatBytes(gm.cudnnCap))
		switch {
		case !positioned:
			t.Basis += fmt.Sprintf("; counted whole in the %s (the checkpoint plan gives no per-node activations)", phase)
		case bytes == 0:
			t.Basis += fmt.Sprintf("; 0 above the %s's peak: every conv's workspace is taken where fewer tensors are alive", phase)
		default:
			t.Basis += fmt.Sprintf("; %s above the %s's peak where %s's is taken (its workspace beside the tensors alive there)", cost.FormatBytes(bytes), phase, at.name)
		}
		return t
	}
	if !positioned {
		fwd, bwd = most, most
		fwdAt, bwdAt = mostAt, mostAt
	}
	return []cost.Term{
		term("cuDNN workspace (forward)", fwd, cost.InForward, fwdAt, "forward"),
		term("cuDNN workspace (backward)", bwd, cost.InBackward, bwdAt, "backward"),
	}
}
