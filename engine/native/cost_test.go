package native

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/engine/native/internal/winograd"
	"pipe/internal/progtest"
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/stdlib"
)

// costSetup is the cost model's setup for a plan, as the planner gives it.
func costSetup(g *stdlib.Graph, p *plan.Plan) cost.Setup {
	byName := make(map[string]int, len(g.Nodes))
	for _, nd := range g.Nodes {
		byName[nd.Name] = nd.ID
	}
	s := cost.Setup{Device: plan.BackendCPU, Precision: p.Precision, Loss: p.Loss, Threads: p.Device.Cores}
	for _, fg := range p.Fusion.Groups {
		grp := cost.Group{Kind: fg.Kind}
		for _, name := range fg.Nodes {
			grp.IDs = append(grp.IDs, byName[name])
		}
		s.Fusion = append(s.Fusion, grp)
	}
	return s
}

// TestCostMatchesKernels holds the cost model to the kernels: for every
// example, planned for the CPU and built through this backend, each
// unit the cost model compiles is one the engine built, and for every
// convolution (2-D, 3-D, transposed, sketched) its Winograd choice and
// workspace are the kernel's, and the plan's workspace is the scratch the
// engine allocates; what each unit keeps and its temporaries are the
// kernel's kspec.
func TestCostMatchesKernels(t *testing.T) {
	paths, _ := filepath.Glob("../../examples/*.pipe")
	if len(paths) < 7 {
		t.Fatalf("found %d examples", len(paths))
	}
	var convs, wino, examples int
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		t.Run(name, func(t *testing.T) {
			prog := loadProgram(t, path)
			p := planCPU(t, prog, planHost)
			g, ds := stdlib.BuildGraph(prog.Model(p.Model))
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
			cfg.Batch, cfg.Threads, cfg.Checkpoint = 1, p.Device.Cores, nil
			m := mustBuild(t, g, cfg)
			c, w := compareUnits(t, newCostArena(g, costSetup(g, p)), m)
			if got := int64(m.scratchWords) * 4; p.Memory.Workspace != got {
				t.Errorf("the plan's workspace is %d bytes, the engine's scratch %d", p.Memory.Workspace, got)
			}
			if p.GAN != nil {
				// The discriminator, built as a gan run builds it: unfused,
				// its loss's gradient handed in from outside.
				dg, ds := stdlib.BuildGraph(prog.Model(p.GAN.Discriminator))
				if ds.HasErrors() {
					t.Fatal(ds)
				}
				cfg.Fusion, cfg.Folds, cfg.Loss, cfg.InputGrad = nil, nil, engine.Loss{Kind: "mse"}, true
				dc, dw := compareUnits(t, newCostArena(dg, cost.Setup{Device: plan.BackendCPU, Loss: "mse", Threads: p.Device.Cores}), mustBuild(t, dg, cfg))
				c, w = c+dc, w+dw
			}
			convs, wino, examples = convs+c, wino+w, examples+1
		})
	}
	t.Logf("%d convolutions (%d Winograd) across %d examples", convs, wino, examples)
	if convs == 0 || winograd.Built != (wino > 0) {
		t.Errorf("%d convolutions, %d of them Winograd (built: %v): the examples no longer exercise the rule", convs, wino, winograd.Built)
	}
}

func isConv(k kernel) bool {
	switch k.(type) {
	case *convKernel, *convTKernel, *skConvKernel:
		return true
	}
	return false
}

// compareUnits holds the cost model's units to the model the engine
// built, and counts the convolutions and the Winograd ones among them.
func compareUnits(t *testing.T, a *costArena, m *model) (convs, wino int) {
	t.Helper()
	if len(a.units) != len(m.units) {
		t.Fatalf("the cost model has %d units, the engine built %d", len(a.units), len(m.units))
	}
	for i, cu := range a.units {
		u := m.units[i]
		if cu.nodes[len(cu.nodes)-1] != u.nodes[len(u.nodes)-1] || len(cu.nodes) != len(u.nodes) {
			t.Errorf("unit %d: the cost model's is %s, the engine's %s", i, cu.nodes[len(cu.nodes)-1].Name, u.describe())
			continue
		}
		if !cu.kernel {
			t.Errorf("%s: the cost model priced it by stdlib's rule, the engine built its kernel", u.describe())
		}
		if isConv(u.k) {
			col, part, w := kernelScratch(u.k)
			convs++
			if w {
				wino++
			}
			if cu.wino != w || cu.col != int64(col) || cu.part != int64(part) {
				t.Errorf("%s: the cost model has winograd %v, column buffer %d, partial gradient %d; the kernel %v, %d, %d",
					u.describe(), cu.wino, cu.col, cu.part, w, col, part)
			}
		}
		if got, want := costSpec(cu), kspecWords(u.sp); !reflect.DeepEqual(got, want) {
			t.Errorf("%s keeps %+v in the cost model, %+v in its kernel", u.describe(), got, want)
		}
	}
	return convs, wino
}

// unitSpec is what a unit keeps and its temporaries, comparable across
// the cost model and the kernels.
type unitSpec struct {
	SaveIn          []bool
	SaveOut         bool
	Aux, TmpF, TmpB []words
}

func costSpec(u *costUnit) unitSpec {
	return unitSpec{SaveIn: u.saveIn, SaveOut: u.saveOut, Aux: nonEmpty(u.aux), TmpF: nonEmpty(u.tmpF), TmpB: nonEmpty(u.tmpB)}
}

func kspecWords(sp kspec) unitSpec {
	conv := func(bs []bsize) []words {
		var out []words
		for _, b := range bs {
			out = append(out, words{per: int64(b.perSample), fixed: int64(b.fixed)})
		}
		return out
	}
	return unitSpec{SaveIn: sp.saveIn, SaveOut: sp.saveOut, Aux: nonEmpty(conv(sp.aux)), TmpF: nonEmpty(conv(sp.tmpF)), TmpB: nonEmpty(conv(sp.tmpB))}
}

func nonEmpty(ws []words) []words {
	if len(ws) == 0 {
		return nil
	}
	return ws
}
