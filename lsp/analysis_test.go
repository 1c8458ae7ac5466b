package lsp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"pipe/diag"
	"pipe/lang"
	"pipe/stdlib"
)

func examples(t testing.TB) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../examples/*.pipe")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = string(b)
	}
	return out
}

// graphPlanner stands in for the planner: it plans from the graph alone.
func graphPlanner(ctx context.Context, p *lang.Program) (*Costs, diag.Diagnostics) {
	return GraphCosts(p), nil
}

func testAnalyzer(t testing.TB) *analyzer {
	return &analyzer{schema: stdlib.Schema(), planner: graphPlanner,
		log: hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Error})}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestEveryPrefixOfEveryExample is a document mid-edit: each prefix of
// each example is analysed, completed at its end and hovered at its last
// word, and none of it may panic (a recovered panic shows as an
// "internal" diagnostic, which fails the test too).
func TestEveryPrefixOfEveryExample(t *testing.T) {
	a := testAnalyzer(t)
	for name, src := range examples(t) {
		t.Run(name, func(t *testing.T) {
			full := a.plan(context.Background(), a.check(name, 1, src))
			if full.diags.HasErrors() {
				t.Fatalf("the example itself has errors: %v", full.diags)
			}
			if full.costs == nil || len(full.costs.Layers) == 0 {
				t.Fatalf("no layer costs for the complete example")
			}
			step := 1
			if testing.Short() {
				step = 7
			}
			for i := 0; i <= len(src); i += step {
				prefix := src[:i]
				an := a.plan(context.Background(), a.check(name, int32(i), prefix))
				for _, d := range an.diags {
					if d.Code == "internal" {
						t.Fatalf("prefix of %d bytes: %v", i, d)
					}
					if d.Subject != nil && (d.Subject.Start.Byte < 0 || d.Subject.End.Byte > len(prefix) || d.Subject.End.Byte < d.Subject.Start.Byte) {
						t.Fatalf("prefix of %d bytes: diagnostic out of the text: %v", i, d)
					}
				}
				m := newMapper(prefix)
				_ = toProtocol(m, an.diags)
				_ = complete(stdlib.Schema(), prefix, m.position(i))
				if an.prog != nil && i > 0 {
					_ = describeAt(stdlib.Schema(), an, i-1)
				}
			}
		})
	}
}

// TestHoverShowsLayerCosts hovers over every layer name of the fashion
// example and checks the numbers of one by hand.
func TestHoverShowsLayerCosts(t *testing.T) {
	src := "device h100-80gb\nprecision bf16\n" + examples(t)["fashion.pipe"]
	a := testAnalyzer(t)
	an := a.plan(context.Background(), a.check("fashion.pipe", 1, src))
	if an.diags.HasErrors() {
		t.Fatal(an.diags)
	}
	// conv 32 k3 pad1 on [1, 28, 28]: 32·(1·3·3) + 32 = 320 parameters.
	off := indexOf(t, src, "conv 32")
	md := describeAt(stdlib.Schema(), an, off)
	for _, want := range []string{"**conv**", "`[32, 28, 28]`", "parameters: 320", "batch of 64", "bf16", "h100-80gb, 80.0 GiB"} {
		if !strings.Contains(md, want) {
			t.Errorf("hover on conv lacks %q:\n%s", want, md)
		}
	}
	md = describeAt(stdlib.Schema(), an, indexOf(t, src, "dense 10"))
	if !strings.Contains(md, "`[10]`") || !strings.Contains(md, "parameters: 1,290") {
		t.Errorf("hover on dense 10:\n%s", md)
	}
	md = describeAt(stdlib.Schema(), an, indexOf(t, src, "fashion {")+1)
	if !strings.Contains(md, "**model fashion**") || !strings.Contains(md, "output: `[10]`") {
		t.Errorf("hover on the model's name:\n%s", md)
	}
	md = describeAt(stdlib.Schema(), an, indexOf(t, src, "optimizer"))
	if !strings.Contains(md, "**optimizer**") {
		t.Errorf("hover on a field:\n%s", md)
	}
	md = describeAt(stdlib.Schema(), an, indexOf(t, src, "lr 1e-3"))
	if !strings.Contains(md, "`lr`") {
		t.Errorf("hover on an argument:\n%s", md)
	}
}

func indexOf(t *testing.T, s, sub string) int {
	t.Helper()
	i := strings.Index(s, sub)
	if i < 0 {
		t.Fatalf("%q not in the text", sub)
	}
	return i
}

// TestSweepPathsInTheEditor: a sweep parameter whose path names nothing
// is an error at its line in the editor, as pipe check says.
func TestSweepPathsInTheEditor(t *testing.T) {
	src := examples(t)["fashion_mlp.pipe"] + "\nsweep { trials 2  metric accuracy max\n  loguniform \"train.lrr\" 1e-4 1e-2 }\n"
	a := testAnalyzer(t)
	an := a.check("fashion_mlp.pipe", 1, src)
	var found bool
	for _, d := range an.diags {
		if d.Severity == diag.Error && strings.Contains(d.Summary+d.Detail, "lrr") && d.Subject != nil &&
			d.Subject.Start.Line == strings.Count(src[:strings.Index(src, "train.lrr")], "\n")+1 {
			found = true
		}
	}
	if !found {
		t.Errorf("no error at the sweep's train.lrr: %v", an.diags)
	}
}
