package weights_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"pipe/engine"
	"pipe/engine/weights"
	"pipe/lang"
	"pipe/stdlib"
)

// exampleGraphs builds every model of every example.
func exampleGraphs(t *testing.T) map[string]*stdlib.Graph {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.pipe")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	out := map[string]*stdlib.Graph{}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, ds := lang.Parse(filepath.Base(path), src)
		p, cds := lang.Check(f, stdlib.Schema())
		if ds = append(ds, cds...); ds.HasErrors() {
			t.Fatalf("%s does not check:\n%v", path, ds)
		}
		for _, m := range p.Models {
			g, gds := stdlib.BuildGraph(m)
			if gds.HasErrors() {
				t.Fatalf("%s: %v", path, gds)
			}
			out[filepath.Base(path)+":"+m.Name] = g
		}
	}
	return out
}

// TestCountsAgreeWithStdlib: for every node of every example's models,
// the trainable values declared are the node's Params as stdlib counts
// them (the count the torch worker's module is checked against), and the
// buffers are its Buffers plus a batchnorm's running statistics.
func TestCountsAgreeWithStdlib(t *testing.T) {
	nodes := 0
	for name, g := range exampleGraphs(t) {
		for _, n := range g.Nodes {
			ts, err := weights.Node(n)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			var params, buffers int64
			for _, x := range ts {
				if x.Buffer {
					buffers += int64(x.Numel())
				} else {
					params += int64(x.Numel())
				}
			}
			wantBuf := n.Buffers
			if n.Op == "batchnorm" {
				wantBuf += n.Params // running mean and variance, one each per channel
			}
			if params != n.Params || buffers != wantBuf {
				t.Errorf("%s: %s (%s) declares %d parameters and %d buffer values; stdlib counts %d and %d",
					name, n.Name, n.Op, params, buffers, n.Params, wantBuf)
			}
			if len(ts) > 0 {
				nodes++
			}
		}
	}
	if nodes < 100 {
		t.Errorf("only %d nodes with tensors across the examples", nodes)
	}
}

// TestInitialIsSeeded: the same seed gives the same values, another seed
// others, and a tensor's values do not depend on the other layers (its
// stream is keyed by its name alone).
func TestInitialIsSeeded(t *testing.T) {
	g := exampleGraphs(t)["fashion.pipe:fashion"]
	if g == nil {
		t.Fatal("fashion.pipe has no model fashion")
	}
	opt := engine.Optimizer{Kind: "adam"}
	a, err := weights.Initial(g, 7, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := weights.Initial(g, 7, opt)
	c, _ := weights.Initial(g, 8, opt)
	if a.Counters[engine.CounterSeed] != 7 || a.Counters[engine.CounterStep] != 0 {
		t.Errorf("counters %v", a.Counters)
	}
	differs := 0
	for i, ta := range a.Tensors {
		if !slices.Equal(ta.Data, b.Tensors[i].Data) {
			t.Errorf("%s differs between two draws at seed 7", ta.Name)
		}
		if !slices.Equal(ta.Data, c.Tensors[i].Data) {
			differs++
		}
	}
	if differs == 0 {
		t.Error("seeds 7 and 8 give the same tensors")
	}
	// Adam's two moments follow the parameters, zero.
	var moments int
	for _, ts := range a.Tensors {
		if _, ok := cutOptimizer(ts.Name); ok {
			moments++
			for _, v := range ts.Data {
				if v != 0 {
					t.Fatalf("%s starts at %g", ts.Name, v)
				}
			}
		}
	}
	if moments == 0 {
		t.Error("no optimizer buffers for adam")
	}
	one := &stdlib.Graph{Nodes: []*stdlib.Node{g.Nodes[0], g.Nodes[1]}}
	alone, err := weights.Initial(one, 7, engine.Optimizer{Kind: "sgd"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range alone.Tensors {
		for _, y := range a.Tensors {
			if x.Name == y.Name && !slices.Equal(x.Data, y.Data) {
				t.Errorf("%s changes when the other layers are removed", x.Name)
			}
		}
	}
}

func cutOptimizer(name string) (string, bool) {
	const p = "optimizer."
	if len(name) > len(p) && name[:len(p)] == p {
		return name[len(p):], true
	}
	return "", false
}

// TestUnknownOpIsUnsupported: a node with parameters whose op the package
// does not know is refused with engine.ErrUnsupported, naming it.
func TestUnknownOpIsUnsupported(t *testing.T) {
	_, err := weights.Node(&stdlib.Node{Name: "mystery1", Op: "mystery", Params: 10})
	if !errors.Is(err, engine.ErrUnsupported) {
		t.Fatalf("got %v", err)
	}
}
