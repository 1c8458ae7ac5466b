package stdlib

import (
	"math"
	"os"
	"path/filepath"
	"pipe/internal/chunkedfile"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/lang"
)

// checkSource parses and checks a file against the registry; the checker
// calls CheckModel, so shape diagnostics come back with the rest.
func checkSource(t *testing.T, name string, src []byte) (*lang.Program, diag.Diagnostics) {
	t.Helper()
	f, ds := lang.Parse(name, src)
	p, cds := lang.Check(f, Schema())
	ds = append(ds, cds...)
	ds.Sort()
	return p, ds
}

func exampleModel(t *testing.T, file string) *lang.Model {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	p, ds := checkSource(t, file, src)
	if ds.HasErrors() || p == nil || len(p.Models) != 1 {
		t.Fatalf("%s does not check: %v", file, ds)
	}
	return p.Models[0]
}

func TestFashionShapes(t *testing.T) {
	g, ds := BuildGraph(exampleModel(t, "fashion.pipe"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	want := []struct {
		name  string
		shape []int64
	}{
		{"input", []int64{1, 28, 28}},
		{"conv1", []int64{32, 28, 28}},
		{"batchnorm1", []int64{32, 28, 28}},
		{"relu1", []int64{32, 28, 28}},
		{"maxpool1", []int64{32, 14, 14}},
		{"conv2", []int64{64, 14, 14}},
		{"batchnorm2", []int64{64, 14, 14}},
		{"relu2", []int64{64, 14, 14}},
		{"maxpool2", []int64{64, 7, 7}},
		{"flatten1", []int64{3136}},
		{"dense1", []int64{128}},
		{"relu3", []int64{128}},
		{"dropout1", []int64{128}},
		{"dense2", []int64{10}},
	}
	if len(g.Nodes) != len(want) {
		t.Fatalf("%d nodes, want %d", len(g.Nodes), len(want))
	}
	for i, w := range want {
		n := g.Nodes[i]
		if n.Name != w.name || !equalShape(n.Out, w.shape) || n.ID != i {
			t.Errorf("node %d: %s %v, want %s %v", i, n.Name, n.Out, w.name, w.shape)
		}
	}
	if !equalShape(g.OutShape(), []int64{10}) {
		t.Errorf("output %v, want [10]", g.OutShape())
	}
	// conv 1→32 k3 and 32→64 k3 with bias, two batchnorms, dense 3136→128
	// and 128→10 with bias.
	params := int64(9*1*32+32) + 2*32 + (9*32*64 + 64) + 2*64 + (3136*128 + 128) + (128*10 + 10)
	if g.Params() != params {
		t.Errorf("%d parameters, want %d", g.Params(), params)
	}
}

// TestSaved checks what fashion.pipe keeps for backward, tensor by tensor:
// conv1 keeps the input; batchnorm1 conv1's output; relu1 its output, which
// maxpool1 keeps too (counted once); conv2 maxpool1's output; batchnorm2
// conv2's; relu2 and maxpool2 relu2's; dense1 the flattened vector; relu3
// its output; dense2 the dropout's output. Max-pool indices are 8 bytes
// per output element and the dropout mask one byte per element.
func TestSaved(t *testing.T) {
	g, _ := BuildGraph(exampleModel(t, "fashion.pipe"))
	elems := int64(784 + 32*28*28 + 32*28*28 + 32*14*14 + 64*14*14 + 64*14*14 + 3136 + 128 + 128)
	if g.SavedElems() != elems {
		t.Errorf("saved %d elements, want %d", g.SavedElems(), elems)
	}
	aux := int64(8*32*14*14 + 8*64*7*7 + 128)
	if g.SavedAux() != aux {
		t.Errorf("saved %d aux bytes, want %d", g.SavedAux(), aux)
	}
	if got := g.SavedBytes(2); got != 2*elems+aux {
		t.Errorf("SavedBytes(2) = %d, want %d", got, 2*elems+aux)
	}
	var sum int64
	for _, n := range g.Nodes {
		sum += n.Saved
	}
	if sum <= g.SavedElems() {
		t.Errorf("per-op Saved sums to %d, not more than the shared total %d", sum, g.SavedElems())
	}
	relu := nodeNamed(g, "relu1")
	if len(relu.Keep) != 1 || relu.Keep[0] != relu.ID {
		t.Errorf("relu keeps %v, want its own output", relu.Keep)
	}
}

func TestFamilyDefaultInput(t *testing.T) {
	g, ds := BuildGraph(oneCall(nil, "resnet18", lang.Args{"classes": iv(20)}))
	if len(ds) > 0 || !equalShape(g.Input, []int64{3, 224, 224}) {
		t.Errorf("resnet18 without input: %v, %v", g.Input, ds)
	}
	_, ds = BuildGraph(oneCall(nil, "dense", lang.Args{"units": iv(3)}))
	if len(ds) != 1 || ds[0].Code != "missing-input" {
		t.Errorf("dense without input: %v", ds)
	}
}

func TestLargeCounts(t *testing.T) {
	// A 10^12-parameter dense layer fits in int64 and is counted exactly.
	g, ds := BuildGraph(oneCall([]int64{1_000_000}, "dense", lang.Args{"units": iv(1_000_000)}))
	if len(ds) > 0 || g.Params() != 1_000_000_000_000+1_000_000 || g.FLOPs() != 2_000_000_000_000+1_000_000 {
		t.Errorf("10^12 dense: %d params, %d FLOPs, %v", g.Params(), g.FLOPs(), ds)
	}
	// 4·10^9 squared does not: reported, not wrapped.
	_, ds = BuildGraph(oneCall([]int64{4_000_000_000}, "dense", lang.Args{"units": iv(4_000_000_000)}))
	if len(ds) != 1 || ds[0].Code != "overflow" {
		t.Errorf("overflowing dense: %v", ds)
	}
	_, ds = BuildGraph(oneCall([]int64{1 << 40, 1 << 40, 1 << 40}, "relu", lang.Args{}))
	if len(ds) != 1 || ds[0].Code != "overflow" {
		t.Errorf("overflowing input: %v", ds)
	}
	if mulSat(math.MaxInt64, 2) != math.MaxInt64 || addSat(math.MaxInt64, 1) != math.MaxInt64 {
		t.Error("saturating arithmetic wraps")
	}
}

func TestLabelsAndBranches(t *testing.T) {
	g, ds := BuildGraph(exampleModel(t, "resblock.pipe"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	stem := g.Labels["stem"]
	add2 := nodeNamed(g, "add2")
	if add2 == nil || len(add2.Inputs) != 2 {
		t.Fatalf("add2: %v", add2)
	}
	proj := g.Nodes[add2.Inputs[1]]
	if proj.Op != "batchnorm" || g.Nodes[proj.Inputs[0]].Op != "conv" || g.Nodes[proj.Inputs[0]].Inputs[0] != stem {
		t.Errorf("add2's branch does not start from stem: %v", proj)
	}
	if !equalShape(add2.Out, []int64{64, 14, 14}) {
		t.Errorf("add2: %v", add2.Out)
	}
	// A labelled statement that fails defines its label, so later uses
	// report nothing more.
	m := &lang.Model{Name: "m", Input: []int64{8}, Stmts: []*lang.ModelStmt{
		{Label: "x", Chain: &lang.Chain{Nodes: []lang.ChainNode{&lang.LayerCall{Name: "conv", Args: lang.Args{"out": iv(4)}}}}},
		{Chain: &lang.Chain{Nodes: []lang.ChainNode{&lang.LayerCall{Name: "add", Args: lang.Args{"tensor": {Tensor: &lang.Chain{From: "x"}}}}}}},
		{Label: "x", Chain: &lang.Chain{Nodes: []lang.ChainNode{&lang.LayerCall{Name: "relu"}}}},
	}}
	_, ds = BuildGraph(m)
	var codes []string
	for _, d := range ds {
		codes = append(codes, d.Code)
	}
	if strings.Join(codes, " ") != "shape-mismatch duplicate-label" {
		t.Errorf("codes %v: %v", codes, ds)
	}
}

func TestRepeatAndNames(t *testing.T) {
	g, ds := BuildGraph(exampleModel(t, "lowrank.pipe"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	var names []string
	for _, n := range g.Nodes {
		names = append(names, n.Name)
	}
	want := "input lowrank_dense1 relu1 lowrank_dense2 relu2 dropout1 lowrank_dense3 relu3 dropout2 dense1"
	if strings.Join(names, " ") != want {
		t.Errorf("names %s", strings.Join(names, " "))
	}
	// Two families in one model get prefixes.
	m := &lang.Model{Name: "m", Input: []int64{3, 32, 32}, Stmts: []*lang.ModelStmt{{Chain: &lang.Chain{Nodes: []lang.ChainNode{
		&lang.LayerCall{Name: "resnet18", Args: lang.Args{"classes": iv(64)}},
		&lang.LayerCall{Name: "mlp", Args: lang.Args{"hidden": lv(32), "out": iv(2)}},
	}}}}}
	g, ds = BuildGraph(m)
	if len(ds) > 0 || nodeNamed(g, "resnet18_1.layer1.0.conv1") == nil || nodeNamed(g, "mlp1.out") == nil {
		t.Errorf("prefixed names missing: %v", ds)
	}
	seen := map[string]bool{}
	for _, n := range g.Nodes {
		if seen[n.Name] {
			t.Errorf("name %s used twice", n.Name)
		}
		seen[n.Name] = true
	}
}

// TestExamples checks every example and builds each model's graph.
func TestExamples(t *testing.T) {
	paths, _ := filepath.Glob("../examples/*.pipe")
	if len(paths) == 0 {
		t.Fatal("no examples")
	}
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		p, ds := checkSource(t, path, src)
		if ds.HasErrors() {
			t.Errorf("%s: %v", path, ds)
			continue
		}
		for _, m := range p.Models {
			g, ds := BuildGraph(m)
			if len(ds) > 0 || g.Params() <= 0 || len(g.OutShape()) == 0 {
				t.Errorf("%s: model %s: %d params, output %v, %v", path, m.Name, g.Params(), g.OutShape(), ds)
			}
			for i, n := range g.Nodes {
				if n.ID != i || n.Range.IsZero() && n.Op != "input" {
					t.Errorf("%s: node %d (%s) has ID %d, range %v", path, i, n.Name, n.ID, n.Range)
				}
				for _, in := range n.Inputs {
					if in >= i {
						t.Errorf("%s: node %s reads a later node", path, n.Name)
					}
				}
			}
		}
	}
}

// TestChunkedErrors runs testdata/errors/*.pipe through the checker and the
// graph builder (see internal/chunkedfile).
func TestChunkedErrors(t *testing.T) {
	chunkedfile.Run(t, "testdata/errors/*.pipe", func(name string, src []byte) diag.Diagnostics {
		_, ds := checkSource(t, name, src)
		return ds
	})
}
