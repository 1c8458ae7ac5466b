package torch

import (
	"testing"

	"pipe/planner/plan"
)

// savedPerSample is what a graph's backward keeps per sample: each kept
// storage once, the nodes' own tensors and the loss's.
func savedPerSample(s *torchSaved) int64 {
	seen := map[int]bool{}
	total := s.loss
	for i, ks := range s.keep {
		total += s.priv[i]
		for _, b := range ks {
			if !seen[b] {
				seen[b] = true
				total += s.out[b]
			}
		}
	}
	return total
}

// TestCompiledSaves: under torch.compile (2.11 on a GPU) a relu whose
// output no conv reads in the backward keeps nothing after a batchnorm
// and a 1-byte mask otherwise, and a max pool keeps int8 offsets and not
// its input; eager (1.13) keeps the relu's bf16 output once (shared with
// the pool) and int64 positions. 2.4 compiles but keeps the pool's
// eager tensors, and so the relu's output it reads.
func TestCompiledSaves(t *testing.T) {
	const head = "pipeline p\nmodel m {\n  input [1, 28, 28]\n  "
	const tail = " -> conv 8 k3 pad1 -> flatten -> dense 10\n}\nsource s synthetic { samples 8  shape [1, 28, 28]  classes 10 }\ntrain { epochs 1 batch 8 optimizer sgd lr 0.1 loss cross_entropy }\n"
	prec := plan.Precision{Mixed: true, ActivationBytes: 2}
	const relu, pooled = 32 * 28 * 28, 32 * 14 * 14 // elements a sample
	for _, tc := range []struct {
		name, block, torch string
		fewer              int64
	}{
		{"bn relu pool", "conv 32 k3 pad1 -> batchnorm -> relu -> maxpool 2", "2.11", relu*2 + pooled*8 - pooled},
		{"relu pool", "conv 32 k3 pad1 -> relu -> maxpool 2", "2.11", relu*2 - relu + pooled*8 - pooled},
		{"bn relu pool, 2.4", "conv 32 k3 pad1 -> batchnorm -> relu -> maxpool 2", "2.4", 0},
		{"bn relu conv", "conv 32 k3 pad1 -> batchnorm -> relu -> conv 32 k3 pad1", "2.11", 0},
	} {
		src := head + tc.block + tail
		_, _, g := loadSrc(t, tc.name, []byte(src))
		eager := savedPerSample(newTorchSaved(g, true, prec, "cross_entropy", "1.13", "9.0"))
		compiled := savedPerSample(newTorchSaved(g, true, prec, "cross_entropy", tc.torch, "9.0"))
		if got := eager - compiled; got != tc.fewer {
			t.Errorf("%s: torch %s saves %d bytes a sample fewer than eager (%d against %d), want %d", tc.name, tc.torch, got, compiled, eager, tc.fewer)
		}
	}
}

// TestCompiledPoolWindow: a window over 25 elements falls back to aten's
// int64 indices under Inductor too.
func TestCompiledPoolWindow(t *testing.T) {
	src := "pipeline p\nmodel m {\n  input [1, 28, 28]\n  conv 4 k3 pad1 -> maxpool 6 -> flatten -> dense 10\n}\nsource s synthetic { samples 8  shape [1, 28, 28]  classes 10 }\ntrain { epochs 1 batch 8 optimizer sgd lr 0.1 loss cross_entropy }\n"
	_, _, g := loadSrc(t, "window", []byte(src))
	prec := plan.Precision{Mixed: true, ActivationBytes: 2}
	eager := savedPerSample(newTorchSaved(g, true, prec, "cross_entropy", "1.13", "9.0"))
	compiled := savedPerSample(newTorchSaved(g, true, prec, "cross_entropy", "2.11", "9.0"))
	if eager != compiled {
		t.Errorf("a 6×6 pool: compiled keeps %d bytes a sample, eager %d; want eager's", compiled, eager)
	}
}
