package torch

import (
	"strings"
	"testing"

	"pipe/lang"
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

func convGraph(t *testing.T, body string) *stdlib.Graph {
	t.Helper()
	src := "pipeline c\nmodel m {\n  input [16, 28, 28]\n  " + body + "\n}\nsource s synthetic { samples 8  shape [16, 28, 28] }\ntrain { epochs 1  batch 4  optimizer sgd lr 0.1  loss mse }\n"
	return graphOf(t, src)
}

// graphOf is the graph of src's first model, which must check.
func graphOf(t *testing.T, src string) *stdlib.Graph {
	t.Helper()
	f, ds := lang.Parse("t.pipe", []byte(src))
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatal(ds)
	}
	g, gds := stdlib.BuildGraph(prog.Models[0])
	if gds.HasErrors() {
		t.Fatal(gds)
	}
	return g
}

// TestConvWorkspaces: a 1×1 stride-1 conv is a plain GEMM with no
// workspace; a 3×3 one needs one that grows with the batch; a strided
// one has no FFT algorithm, only GEMM's column buffer.
func TestConvWorkspaces(t *testing.T) {
	ws := convWorkspaces(convGraph(t, "conv 32 k1 -> conv 32 k3 pad1 -> conv 32 k3 stride2 pad1"), 2, false)
	if len(ws) != 3 {
		t.Fatalf("%d convolutions priced", len(ws))
	}
	if len(ws[0].fwd)+len(ws[0].bwd) != 0 {
		t.Errorf("1×1 conv: %+v", ws[0])
	}
	if v, _ := largest(ws[1].fwd, 1, 0); v <= 0 {
		t.Errorf("3×3 conv: %+v", ws[1])
	}
	// Stride 2 on 28×28 gives 14×14: GEMM's columns are 32 × 9 × 14 × 14
	// values of 2 bytes a sample.
	if f := ws[2].fwd; len(f) != 1 || f[0].algo != "GEMM's column buffer" || f[0].perSample != 32*9*14*14*2 || f[0].fixed != 0 {
		t.Errorf("strided conv: %+v", ws[2])
	}
}

// TestFFTNeedsPlainConvs: cuDNN's FFT algorithms take neither dilation
// nor groups, so a dilated or grouped 3×3 conv has GEMM's column buffer
// alone; the same conv undilated has FFT_TILING's transforms too.
func TestFFTNeedsPlainConvs(t *testing.T) {
	ws := convWorkspaces(convGraph(t, "conv 32 k3 pad1 -> conv 32 k3 pad 2 dilation 2 -> conv 32 k3 pad1 groups 4"), 2, false)
	algos := func(c convWorkspace) (out []string) {
		for _, f := range c.fwd {
			out = append(out, f.algo)
		}
		return out
	}
	if a := algos(ws[0]); len(a) != 2 {
		t.Errorf("plain conv: %v", a)
	}
	for _, c := range ws[1:] {
		if a := algos(c); len(a) != 1 || a[0] != "GEMM's column buffer" {
			t.Errorf("%s: %v, want GEMM's column buffer alone", c.name, a)
		}
	}
}

// TestCudnnCapExcludes: a family whose workspace passes the cap is not
// offered (CUDNN_CONV_WSCAP_DBG), so a 512 → 512 3×3 conv, whose FFT
// filter transforms alone are 512 × 512 × 32 × 17 × 8 bytes (1.06 GiB),
// takes GEMM's column buffer under a 1 GiB cap, not the cap itself.
func TestCudnnCapExcludes(t *testing.T) {
	g := graphOf(t, "pipeline c\nmodel m {\n  input [512, 7, 7]\n  conv 512 k3 pad1\n}\nsource s synthetic { samples 8  shape [512, 7, 7] }\ntrain { epochs 1  batch 4  optimizer sgd lr 0.1  loss mse }\n")
	ws := convWorkspaces(g, 2, false)
	v, algo := largest(ws[0].fwd, 256, 1<<30)
	if want := int64(256 * 512 * 9 * 49 * 2); v != want || algo != "GEMM's column buffer" {
		t.Errorf("batch 256: %d bytes (%s), want %d of GEMM's column buffer", v, algo, want)
	}
}

// TestCudnnTermWherePriced: a conv's workspace is taken where it runs,
// so in the forward it adds only what exceeds the activations the later
// nodes have yet to keep; without per-node activations (a checkpoint
// plan) it counts whole.
func TestCudnnTermWherePriced(t *testing.T) {
	g := convGraph(t, "conv 64 k3 pad1 -> relu -> conv 64 k3 pad1")
	gm := &gpuTerms{benchmark: true, cudnnCap: 1 << 30, convWS: convWorkspaces(g, 2, false)}
	per := make([]int64, len(g.Nodes))
	for i := range per {
		per[i] = 1 << 20 // 1 MiB a node and sample
	}
	ws0, _ := largest(gm.convWS[0].fwd, 4, 1<<30)
	ws1, _ := largest(gm.convWS[1].fwd, 4, 1<<30)
	base := cost.Sum(per...)
	terms := func(act int64) (f, b cost.Term) {
		ts := gm.cudnnTerms(cost.GPUStep{Batch: 4, Act: act, Baseline: base, PerNode: per, Saved: base, Text: true})
		return ts[0], ts[2] // the forward's and the backward's trials
	}
	f, b := terms(base)
	after0 := int64(len(per)-1-gm.convWS[0].id) << 20 * 4
	want := max(0, ws0-after0, ws1-int64(len(per)-1-gm.convWS[1].id)<<20*4)
	if f.Bytes != want || !f.Capped || f.Phases != cost.InForward || f.Basis == "" {
		t.Errorf("forward: %d bytes, want %d (workspaces %d, %d)", f.Bytes, want, ws0, ws1)
	}
	if b.Bytes > max(ws0, ws1) || b.Phases != cost.InBackward {
		t.Errorf("backward: %d bytes, more than the largest workspace %d", b.Bytes, max(ws0, ws1))
	}
	f, b = terms(base / 2)
	if f.Bytes != max(ws0, ws1) || b.Bytes != max(ws0, ws1) {
		t.Errorf("checkpointed: %d and %d bytes, want the largest workspace %d whole", f.Bytes, b.Bytes, max(ws0, ws1))
	}
}

func algosOf(fams []convFamily) (out []string) {
	for _, f := range fams {
		out = append(out, f.algo)
	}
	return out
}

// TestGemmColumnsInTheForwardOnly: explicit GEMM is one of cuDNN's
// forward algorithms, not of its backward data or filter ones, so a
// strided conv's column buffer is the forward's and its backward has
// none; a transposed conv runs cuDNN's backward data forward and a
// forward conv for its input gradient, so there the buffer is the
// backward's.
func TestGemmColumnsInTheForwardOnly(t *testing.T) {
	ws := convWorkspaces(convGraph(t, "conv 32 k3 stride2 pad1 -> convtranspose 16 k4 s2 pad1"), 2, false)
	if len(ws) != 2 {
		t.Fatalf("%d convolutions priced", len(ws))
	}
	if f, b := algosOf(ws[0].fwd), algosOf(ws[0].bwd); len(f) != 1 || len(b) != 0 {
		t.Errorf("strided conv: forward %v, backward %v; want GEMM's column buffer in the forward alone", f, b)
	}
	if f, b := algosOf(ws[1].fwd), algosOf(ws[1].bwd); len(f) != 0 || len(b) != 1 || b[0] != "GEMM's column buffer" {
		t.Errorf("transposed conv: forward %v, backward %v; want GEMM's column buffer in the backward alone", f, b)
	}
}

// TestChannelsLastTakesNoFFT: cuDNN's FFT_TILING takes NCHW tensors
// (HW-packed) only, so under channels_last a plain stride-1 3×3 conv has
// GEMM's column buffer in the forward and no workspace in the backward.
func TestChannelsLastTakesNoFFT(t *testing.T) {
	g := convGraph(t, "conv 32 k3 pad1")
	nchw, nhwc := convWorkspaces(g, 2, false)[0], convWorkspaces(g, 2, true)[0]
	if len(nchw.fwd) != 2 || len(nchw.bwd) != 1 {
		t.Errorf("NCHW: forward %v, backward %v; want FFT_TILING in both", algosOf(nchw.fwd), algosOf(nchw.bwd))
	}
	if f := algosOf(nhwc.fwd); len(f) != 1 || f[0] != "GEMM's column buffer" || len(nhwc.bwd) != 0 {
		t.Errorf("NHWC: forward %v, backward %v; want GEMM's column buffer alone, in the forward", f, algosOf(nhwc.bwd))
	}
}

// TestVolumeConvsHaveNoGemmColumns: cuDNN's explicit GEMM is for 2-D
// convolutions only, so a 3-D conv's priced families are none; its 3-D
// FFT_TILING is named as not priced.
func TestVolumeConvsHaveNoGemmColumns(t *testing.T) {
	g := graphOf(t, "pipeline c\nmodel m {\n  input [1, 4, 16, 16]\n  conv3d 8 k3 pad1 -> conv3d 8 k3 stride2 pad1\n}\nsource s synthetic { samples 8  shape [1, 4, 16, 16] }\ntrain { epochs 1  batch 4  optimizer sgd lr 0.1  loss mse }\n")
	ws := convWorkspaces(g, 2, false)
	if len(ws) != 2 {
		t.Fatalf("%d convolutions priced", len(ws))
	}
	for _, c := range ws {
		if len(c.fwd)+len(c.bwd) != 0 {
			t.Errorf("%s: forward %v, backward %v; want none", c.name, algosOf(c.fwd), algosOf(c.bwd))
		}
	}
	if ws[0].unpriced != "3-D FFT_TILING" || ws[1].unpriced != "" {
		t.Errorf("unpriced: %q (stride 1), %q (stride 2)", ws[0].unpriced, ws[1].unpriced)
	}
}

// TestBenchmarkTrialsOnlyWhenBenchmarked: with cudnn.benchmark on, the
// workspace is priced as the first step's trials and the steady term adds
// nothing above them; with it off there are no trials, and the steady
// term carries the heuristic pick's bound.
func TestBenchmarkTrialsOnlyWhenBenchmarked(t *testing.T) {
	g := convGraph(t, "conv 64 k3 stride2 pad1")
	step := cost.GPUStep{Batch: 4, Text: true}
	for _, bench := range []bool{true, false} {
		gm := &gpuTerms{benchmark: bench, convWS: convWorkspaces(g, 2, true)}
		if bench {
			gm.cudnnCap = 1 << 30
		}
		want, _ := largest(gm.convWS[0].fwd, 4, gm.cudnnCap)
		byName := map[string]cost.Term{}
		for _, tm := range gm.cudnnTerms(step) {
			byName[tm.Name] = tm
		}
		trials, hasTrials := byName["cuDNN benchmark trials (forward)"]
		steady := byName["cuDNN workspace (forward)"]
		switch {
		case want <= 0:
			t.Fatalf("no forward workspace to price")
		case bench && (!hasTrials || trials.Bytes != want || steady.Bytes != 0):
			t.Errorf("benchmark on: trials %+v, steady %d bytes; want trials of %d and 0 above", trials, steady.Bytes, want)
		case !bench && (hasTrials || steady.Bytes != want || strings.Contains(steady.Basis, "times every offered")):
			t.Errorf("benchmark off: trials %v, steady %d bytes (%s); want no trials and %d", hasTrials, steady.Bytes, steady.Basis, want)
		}
	}
}

// TestCudnnSetupFollowsTheModel: 2-D convolutions run channels_last
// with cudnn.benchmark; a model with volumes runs neither, and its terms
// have no workspace cap, as the engine sets none.
func TestCudnnSetupFollowsTheModel(t *testing.T) {
	if cl, b := cudnnSetup(convGraph(t, "conv 8 k3 pad1")); !cl || !b {
		t.Errorf("2-D: channels_last %v, benchmark %v", cl, b)
	}
	vol := graphOf(t, "pipeline c\nmodel m {\n  input [1, 4, 16, 16]\n  conv3d 8 k3 pad1\n}\nsource s synthetic { samples 8  shape [1, 4, 16, 16] }\ntrain { epochs 1  batch 4  optimizer sgd lr 0.1  loss mse }\n")
	if cl, b := cudnnSetup(vol); cl || b {
		t.Errorf("3-D: channels_last %v, benchmark %v", cl, b)
	}
	gm := newGPUTerms(vol, plan.Precision{}, cost.GPUSetup{}, "2.11")
	if gm.benchmark || gm.cudnnCap != 0 {
		t.Errorf("3-D terms: benchmark %v, cap %d", gm.benchmark, gm.cudnnCap)
	}
}
