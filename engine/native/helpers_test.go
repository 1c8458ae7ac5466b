package native

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"pipe/dataset"
	"pipe/engine"
	"pipe/lang"
	"pipe/stdlib"
)

// graphOf checks a model written in pipe and builds its graph.
func graphOf(t testing.TB, model string) *stdlib.Graph {
	t.Helper()
	src := "pipeline t\nmodel m {\n" + model + "\n}\n"
	return graphOfFile(t, "t.pipe", []byte(src))
}

func graphOfFile(t testing.TB, name string, src []byte) *stdlib.Graph {
	t.Helper()
	f, ds := lang.Parse(name, src)
	p, cds := lang.Check(f, stdlib.Schema())
	ds = append(ds, cds...)
	if ds.HasErrors() || p == nil || len(p.Models) == 0 {
		t.Fatalf("%s does not check: %v", name, ds)
	}
	g, gds := stdlib.BuildGraph(p.Models[0])
	if gds.HasErrors() {
		t.Fatalf("%s: %v", name, gds)
	}
	return g
}

func exampleGraph(t testing.TB, file string) *stdlib.Graph {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	return graphOfFile(t, file, src)
}

// fuseAll groups nodes with the planner's patterns (planner/fusion.go):
// conv+batchnorm(+activation), conv+activation, dense+activation, each
// node the only reader of the one before.
func fuseAll(g *stdlib.Graph) []engine.FusionGroup {
	readers := make([][]int, len(g.Nodes))
	for _, n := range g.Nodes {
		for _, j := range n.Inputs {
			readers[j] = append(readers[j], n.ID)
		}
	}
	used := make([]bool, len(g.Nodes))
	only := func(i int, ops ...string) int {
		if len(readers[i]) != 1 || i == g.Output {
			return -1
		}
		r := readers[i][0]
		if used[r] {
			return -1
		}
		for _, op := range ops {
			if g.Nodes[r].Op == op {
				return r
			}
		}
		return -1
	}
	acts := []string{"relu", "gelu", "silu", "hardswish", "sigmoid", "tanh"}
	var out []engine.FusionGroup
	add := func(kind string, ids ...int) {
		fg := engine.FusionGroup{Kind: kind}
		for _, id := range ids {
			used[id] = true
			fg.Nodes = append(fg.Nodes, g.Nodes[id].Name)
		}
		out = append(out, fg)
	}
	for _, n := range g.Nodes {
		if used[n.ID] {
			continue
		}
		switch n.Op {
		case "conv":
			if b := only(n.ID, "batchnorm"); b >= 0 {
				if a := only(b, acts...); a >= 0 {
					add("conv+batchnorm+activation", n.ID, b, a)
				} else {
					add("conv+batchnorm", n.ID, b)
				}
			} else if a := only(n.ID, acts...); a >= 0 {
				add("conv+activation", n.ID, a)
			}
		case "dense", "lowrank_dense":
			if a := only(n.ID, acts...); a >= 0 {
				add("dense+bias+activation", n.ID, a)
			}
		}
	}
	return out
}

// folds lists the conv and batchnorm pairs of g (planner/fusion.go).
func foldsOf(g *stdlib.Graph) [][2]string {
	readers := make([]int, len(g.Nodes))
	for _, n := range g.Nodes {
		for _, j := range n.Inputs {
			readers[j]++
		}
	}
	var out [][2]string
	for _, n := range g.Nodes {
		if n.Op == "batchnorm" && len(n.Inputs) == 1 {
			c := g.Nodes[n.Inputs[0]]
			if c.Op == "conv" && readers[c.ID] == 1 {
				out = append(out, [2]string{c.Name, n.Name})
			}
		}
	}
	return out
}

func cfgOf(batch int, loss, opt string) engine.Config {
	return engine.Config{Batch: batch, Seed: 1, Loss: engine.Loss{Kind: loss}, Optimizer: engine.Optimizer{Kind: opt}}
}

func mustBuild(t testing.TB, g *stdlib.Graph, cfg engine.Config) *model {
	t.Helper()
	m, err := build(g, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// randomBatch makes a batch for m: inputs from N(0,1), targets suited to
// the loss.
func randomBatch(m *model, n int, seed uint64) *dataset.Batch {
	r := rand.New(rand.NewPCG(seed, 7))
	in := m.units[0].out.size()
	b := &dataset.Batch{N: n, X: make([]float32, n*in)}
	for i := range b.X {
		b.X[i] = float32(r.NormFloat64())
	}
	out := m.units[m.outUnit].out
	switch m.loss.kind {
	case "cross_entropy":
		b.Y = make([]float32, n*out.s())
		for i := range b.Y {
			b.Y[i] = float32(r.IntN(out.c))
		}
	case "bce", "dice":
		b.Y = make([]float32, n*out.size())
		for i := range b.Y {
			b.Y[i] = float32(r.IntN(2))
		}
	default:
		b.Y = make([]float32, n*out.size())
		for i := range b.Y {
			b.Y[i] = float32(r.NormFloat64())
		}
	}
	return b
}

// lossOnly runs the training forward and the loss without changing any
// state the next step sees.
func (m *model) lossOnly(b *dataset.Batch) float64 {
	m.batch = b
	defer func() { m.batch = nil }()
	m.runForward(m.train, b.N, true, nil)
	for _, bn := range m.bns {
		bn.pending = false
	}
	return m.loss.eval(m, m.train, b, 1, false)
}

func finiteF(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
