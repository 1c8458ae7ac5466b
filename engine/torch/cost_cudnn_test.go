package torch

import (
	"testing"

	"pipe/lang"
	"pipe/planner/cost"
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
	ws := convWorkspaces(convGraph(t, "conv 32 k1 -> conv 32 k3 pad1 -> conv 32 k3 stride2 pad1"), 2)
	if len(ws) != 3 {
		t.Fatalf("%d convolutions priced", len(ws))
	}
	if len(ws[0].fams) != 0 {
		t.Errorf("1×1 conv: %+v", ws[0])
	}
	if v, _ := ws[1].at(1, 0); v <= 0 {
		t.Errorf("3×3 conv: %+v", ws[1])
	}
	// Stride 2 on 28×28 gives 14×14: GEMM's columns are 32 × 9 × 14 × 14
	// values of 2 bytes a sample.
	if f := ws[2].fams; len(f) != 1 || f[0].algo != "GEMM's column buffer" || f[0].perSample != 32*9*14*14*2 || f[0].fixed != 0 {
		t.Errorf("strided conv: %+v", ws[2])
	}
}

// TestFFTNeedsPlainConvs: cuDNN's FFT algorithms take neither dilation
// nor groups, so a dilated or grouped 3×3 conv has GEMM's column buffer
// alone; the same conv undilated has FFT_TILING's transforms too.
func TestFFTNeedsPlainConvs(t *testing.T) {
	ws := convWorkspaces(convGraph(t, "conv 32 k3 pad1 -> conv 32 k3 pad 2 dilation 2 -> conv 32 k3 pad1 groups 4"), 2)
	algos := func(c convWorkspace) (out []string) {
		for _, f := range c.fams {
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
	ws := convWorkspaces(g, 2)
	v, algo := ws[0].at(256, 1<<30)
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
	gm := &gpuTerms{cudnnCap: 1 << 30, convWS: convWorkspaces(g, 2)}
	per := make([]int64, len(g.Nodes))
	for i := range per {
		per[i] = 1 << 20 // 1 MiB a node and sample
	}
	ws0, _ := gm.convWS[0].at(4, 1<<30)
	ws1, _ := gm.convWS[1].at(4, 1<<30)
	base := cost.Sum(per...)
	terms := func(act int64) (f, b cost.Term) {
		ts := gm.cudnnTerms(cost.GPUStep{Batch: 4, Act: act, Baseline: base, PerNode: per, Saved: base, Text: true})
		return ts[0], ts[1]
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
