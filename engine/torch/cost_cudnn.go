package torch

import (
	"fmt"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// cuDNN's workspace per convolution, from its shapes, its layout and the
// algorithm families cuDNN offers for each of its calls, and where in the
// step it is taken. Derivation: docs/design/gpu-memory.md ("The cuDNN
// workspace").

// fftTile is the tile of cuDNN's FFT_TILING algorithms (32 × 32), whose
// transforms are 32 × 17 complex values a channel (a real FFT keeps
// half the spectrum plus one).
const fftTile = 32

// fftTile3D is the largest filter side cuDNN's 3-D FFT_TILING takes
// (16); its workspace is not priced.
const fftTile3D = 16

// convFamily is one algorithm family's workspace for a conv: fixed bytes
// and bytes per sample.
type convFamily struct {
	algo             string
	fixed, perSample int64
}

// convWorkspace is what cuDNN may take for one convolution: the
// families with a workspace that its shape admits, for the forward call
// (fwd) and for the backward's data and filter gradients (bwd). Implicit
// GEMM, which every shape admits, takes none. unpriced names a family
// cuDNN offers whose workspace the plan does not size.
type convWorkspace struct {
	id       int
	name     string
	fwd, bwd []convFamily
	unpriced string
}

// largest is the workspace at batch b of the largest family in fams
// within cap (cuDNN offers no algorithm whose workspace passes
// CUDNN_CONV_WSCAP_DBG; cap <= 0: none set), and its name; 0 (implicit
// GEMM) when none is.
func largest(fams []convFamily, b, cap int64) (int64, string) {
	var most int64
	algo := "implicit GEMM, no workspace"
	for _, f := range fams {
		v := cost.Add(f.fixed, cost.Mul(b, f.perSample))
		if (cap <= 0 || v <= cap) && v > most {
			most, algo = v, f.algo
		}
	}
	return most, algo
}

// convWorkspaces lists, per conv and convtranspose of g, the algorithm
// families cuDNN offers for its calls that take a workspace (cuDNN's
// tables of supported configurations):
//   - explicit GEMM's column buffer, an algorithm of the forward call
//     alone (cudnnConvolutionFwdAlgo_t has GEMM; the backward data and
//     filter algorithms have none) and of 2-D convolutions alone, for
//     every shape but 1×1 stride 1 (a plain GEMM). A transposed conv's
//     forward is cuDNN's backward data, and its input gradient a
//     forward conv, so there the buffer is the backward's;
//   - FFT_TILING's transforms of input, output and filter, in every call,
//     for 2-D stride-1 kernels larger than 1, neither dilated nor
//     grouped, on NCHW tensors (HW-packed): channels_last's NHWC tensors
//     do not take it. 3-D FFT_TILING (NCDHW, stride 1, kernels up to 16)
//     is offered but not priced (unpriced says so).
//
// elem is the compute precision's bytes; channelsLast says the engine
// lays 2-D activations out as NHWC.
func convWorkspaces(g *stdlib.Graph, elem int64, channelsLast bool) []convWorkspace {
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
		plain := max(n.Args.Dilation, 1) == 1 && max(n.Args.Groups, 1) == 1
		if len(in) == 3 && (k > 1 || stride > 1) {
			if n.Op == "conv" {
				cols := cost.Mul(cost.Mul(cin, taps), cost.Numel(spatial))
				w.fwd = append(w.fwd, convFamily{algo: "GEMM's column buffer", perSample: cost.Mul(cols, elem)})
			} else {
				cols := cost.Mul(cost.Mul(cout, taps), cost.Numel(spatial))
				w.bwd = append(w.bwd, convFamily{algo: "GEMM's column buffer", perSample: cost.Mul(cols, elem)})
			}
		}
		if len(in) == 3 && stride == 1 && k > 1 && k < fftTile && plain && !channelsLast {
			step := fftTile - k + 1
			tiles := ceilDiv(in[1], step) * ceilDiv(in[2], step)
			spectrum := int64(fftTile * (fftTile/2 + 1) * 8) // complex64 values of one channel's tile
			f := convFamily{algo: "FFT_TILING's transforms",
				fixed: cost.Mul(cost.Mul(cin, cout), spectrum), perSample: cost.Mul(cost.Mul(cin+cout, tiles), spectrum)}
			w.fwd, w.bwd = append(w.fwd, f), append(w.bwd, f)
		}
		if len(in) == 4 && stride == 1 && k > 1 && k <= fftTile3D && plain {
			w.unpriced = "3-D FFT_TILING"
		}
		out = append(out, w)
	}
	return out
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// layerWorkspaces is each conv's workspace by node ID, for the plan's
// layers: its largest family, of either pass, whose fixed part is within
// the cap, held to the cap (a family that passes it at a batch is not
// offered there).
func (gm *gpuTerms) layerWorkspaces(g *stdlib.Graph) []cost.Workspace {
	if len(gm.convWS) == 0 {
		return nil
	}
	out := make([]cost.Workspace, len(g.Nodes))
	for _, c := range gm.convWS {
		w := cost.Workspace{Cap: gm.cudnnCap, Basis: "cuDNN: implicit GEMM, no workspace"}
		for _, f := range append(append([]convFamily(nil), c.fwd...), c.bwd...) {
			if (gm.cudnnCap <= 0 || f.fixed <= gm.cudnnCap) && (w.PerSample == 0 && w.Fixed == 0 || f.fixed+f.perSample > w.Fixed+w.PerSample) {
				w.Fixed, w.PerSample, w.Basis = f.fixed, f.perSample, "cuDNN: "+f.algo
			}
		}
		out[c.id] = w
	}
	return out
}

// cudnnTerms are the workspace terms at batch b, for the forward and the
// backward. A conv's workspace is taken while it runs, so each phase's
// term is what it adds above the phase's other tensors where it is
// taken: in the forward, conv i's workspace less the activations the
// nodes after it have not kept yet; in the backward, the kept
// activations of the nodes up to i, the most activation gradients alive
// at once and the workspace, less the backward peak the other terms
// price (at most the workspace itself). Without the per-node activations
// (a checkpoint plan), the largest workspace whole.
//
// Under cudnn.benchmark the first step times every offered algorithm
// with one buffer of the largest offered workspace (a transient: freed,
// and the cache emptied, after), and the algorithm kept takes at most
// that at the same point of each later step; so the trials' terms carry
// the bytes, and the steady ones say they add nothing above them.
// Without it, each call takes the workspace of the heuristic's pick,
// bounded by the largest offered.
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
	var ph [2]cudnnPhase
	for _, c := range gm.convWS {
		wf, af := largest(c.fwd, b, gm.cudnnCap)
		wb, ab := largest(c.bwd, b, gm.cudnnCap)
		f, bk := wf, wb
		if positioned && c.id < n {
			f = max(0, wf-cost.Mul(after[c.id+1], b))
			upto := after[0] - after[c.id+1]
			bk = min(wb, max(0, cost.Add(cost.Mul(cost.Add(upto, live), b), wb)-cost.Mul(peak, b)))
		}
		ph[0].see(c, wf, af, f)
		ph[1].see(c, wb, ab, bk)
	}
	var out []cost.Term
	for i, p := range []struct {
		name  string
		flags uint8
	}{{"forward", cost.InForward}, {"backward", cost.InBackward}} {
		at := ph[i]
		if !positioned {
			at.bytes, at.at = at.most, at.mostAt
		}
		out = append(out, gm.cudnnPhaseTerms(s.Text, positioned, p.name, p.flags, at)...)
	}
	return out
}

// cudnnPhase is one pass's cuDNN workspace: the largest offered (most,
// mostAt, mostAlgo) and the most it adds above the pass's peak (bytes,
// at).
type cudnnPhase struct {
	most, bytes          int64
	mostAt, at           convWorkspace
	mostAlgo             string
	unpriced, unpricedAt string
}

func (p *cudnnPhase) see(c convWorkspace, ws int64, algo string, adds int64) {
	if ws > p.most || p.mostAt.name == "" {
		p.most, p.mostAt, p.mostAlgo = ws, c, algo
	}
	if adds > p.bytes || p.at.name == "" {
		p.bytes, p.at = adds, c
	}
	if c.unpriced != "" && p.unpriced == "" {
		p.unpriced, p.unpricedAt = c.unpriced, c.name
	}
}

// cudnnPhaseTerms are one pass's terms: the benchmark trials' and the
// steady workspace's under cudnn.benchmark, the steady one alone without.
func (gm *gpuTerms) cudnnPhaseTerms(text, positioned bool, phase string, flags uint8, p cudnnPhase) []cost.Term {
	term := func(name string, bytes int64, basis string) cost.Term {
		t := cost.Term{Name: name, Bytes: bytes, Sizes: []int64{bytes}, Phases: flags, Source: plan.SourceFormula, Capped: true}
		if text {
			t.Basis = basis
		}
		return t
	}
	if !text {
		if gm.benchmark {
			return []cost.Term{term("cuDNN benchmark trials ("+phase+")", p.bytes, ""), term("cuDNN workspace ("+phase+")", 0, "")}
		}
		return []cost.Term{term("cuDNN workspace ("+phase+")", p.bytes, "")}
	}
	capSay := "no CUDNN_CONV_WSCAP_DBG (the engine sets it with cudnn.benchmark only)"
	if gm.cudnnCap > 0 {
		capSay = fmt.Sprintf("within CUDNN_CONV_WSCAP_DBG's %s, which the engine sets", cost.FormatBytes(gm.cudnnCap))
	}
	largestSay := fmt.Sprintf("the largest workspace cuDNN offers in the %s, %s's (%s, %s, %s)", phase, p.mostAt.name, p.mostAlgo, cost.FormatBytes(p.most), capSay)
	var where string
	switch {
	case !positioned:
		where = fmt.Sprintf("; counted whole in the %s (the checkpoint plan gives no per-node activations)", phase)
	case p.bytes == 0:
		where = fmt.Sprintf("; 0 above the %s's peak: every conv's workspace is taken where fewer tensors are alive", phase)
	default:
		where = fmt.Sprintf("; %s above the %s's peak where %s's is taken (its workspace beside the tensors alive there)", cost.FormatBytes(p.bytes), phase, p.at.name)
	}
	if p.unpriced != "" {
		where += fmt.Sprintf("; %s, which cuDNN also offers (%s's), is not priced", p.unpriced, p.unpricedAt)
	}
	if !gm.benchmark {
		return []cost.Term{term("cuDNN workspace ("+phase+")", p.bytes,
			"cudnn.benchmark off, so no trials: each call takes the workspace of the first engine config of cuDNN's heuristic that runs "+
				"(Conv_v8.cpp, get_configs_from_heuristics and try_configs), at most "+largestSay+where)}
	}
	return []cost.Term{
		term("cuDNN benchmark trials ("+phase+")", p.bytes,
			"at the first step cudnn.benchmark times every offered algorithm with one buffer of the largest workspace among them, "+
				"freed after and the cache emptied (Conv_v8.cpp, generate_and_filter_plans and run_single_conv): "+largestSay+where),
		term("cuDNN workspace ("+phase+")", 0,
			"0 above the benchmark trials: the algorithm cudnn.benchmark keeps takes at most the trials' buffer, at the same point of each later step; "+
				"max_memory_allocated, which the run reports, holds step 1's trials"),
	}
}
