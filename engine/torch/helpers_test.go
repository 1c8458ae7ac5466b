package torch

import (
	"os"
	"testing"

	"pipe/dataset"
	"pipe/engine"

	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/internal/torchtest"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// testPython is the Python the tests drive: $PIPE_PYTHON, else Debian's
// /usr/bin/python3 (python3-torch), else python3.
func testPython(t testing.TB) string { t.Helper(); return torchtest.Python(t) }

var testHost = planner.HostInfo{MemTotal: 24 << 30, MemAvailable: 24 << 30, Cores: 2}

// loadSrc checks and plans src for the CPU, with both engines' cost
// models: the tests build a plan on either engine.
func loadSrc(t testing.TB, name string, src []byte, opts ...planner.Option) (*lang.Program, *plan.Plan, *stdlib.Graph) {
	t.Helper()
	f, ds := lang.Parse(name, src)
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatalf("%s does not check:\n%v", name, ds)
	}
	opts = append([]planner.Option{planner.WithCosts(native.Cost{}, Cost{}), planner.WithDevice("cpu"), planner.WithHost(testHost), planner.WithSource(src)}, opts...)
	p, pds := planner.Plan(progtest.Decoded(t, prog), opts...)
	if pds.HasErrors() || p == nil {
		t.Fatalf("%s does not plan:\n%v", name, pds)
	}
	g, gds := stdlib.BuildGraph(prog.Model(p.Model))
	if gds.HasErrors() {
		t.Fatal(gds)
	}
	return prog, p, g
}

func loadFile(t testing.TB, path string, opts ...planner.Option) (*lang.Program, *plan.Plan, *stdlib.Graph) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return loadSrc(t, path, src, opts...)
}

// randomBatch is n samples for g (dataset.RandomBatch).
func randomBatch(g *stdlib.Graph, loss string, n int, seed uint64) *dataset.Batch {
	return dataset.RandomBatch(g.Input, g.OutShape(), loss, n, seed)
}

func buildTorch(t testing.TB, g *stdlib.Graph, cfg engine.Config, b Backend) *model {
	t.Helper()
	m, err := b.Build(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m.(*model)
}
