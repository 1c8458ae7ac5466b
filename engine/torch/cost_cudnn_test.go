package torch

import (
	"testing"

	"pipe/lang"
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
	if ws[0].fixed != 0 || ws[0].perSample != 0 {
		t.Errorf("1×1 conv: %+v", ws[0])
	}
	if ws[1].perSample <= 0 {
		t.Errorf("3×3 conv: %+v", ws[1])
	}
	// Stride 2 on 28×28 gives 14×14: GEMM's columns are 32 × 9 × 14 × 14
	// values of 2 bytes a sample.
	if ws[2].algo != "GEMM's column buffer" || ws[2].perSample != 32*9*14*14*2 || ws[2].fixed != 0 {
		t.Errorf("strided conv: %+v", ws[2])
	}
}

// TestCudnnTermIsCapped: the term is the largest conv's workspace, grows
// with the batch, and never passes the cap the plan sets.
func TestCudnnTermIsCapped(t *testing.T) {
	g := convGraph(t, "conv 64 k3 pad1 -> relu -> conv 64 k3 pad1")
	gm := &gpuTerms{cudnnCap: 64 << 20, convWS: convWorkspaces(g, 2)}
	small, big := gm.cudnnTerm(1, false), gm.cudnnTerm(4096, true)
	if !small.Capped || small.Bytes <= 0 || small.Bytes >= big.Bytes {
		t.Errorf("batch 1: %d bytes, batch 4096: %d", small.Bytes, big.Bytes)
	}
	if big.Bytes != 64<<20 || big.Basis == "" {
		t.Errorf("batch 4096: %d bytes (cap %d), basis %q", big.Bytes, 64<<20, big.Basis)
	}
	var most int64
	for _, c := range gm.convWS {
		most = max(most, c.at(1, gm.cudnnCap))
	}
	if small.Bytes != most {
		t.Errorf("batch 1: %d bytes, the largest conv's is %d", small.Bytes, most)
	}
}
