package lsp

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"

	"pipe/diag"
	"pipe/lang"
	"pipe/lang/ast"
	"pipe/stdlib"
)

// Planner plans a checked program that has no errors and returns its costs
// in the form hover shows them, with the planner's diagnostics (such as
// "does not fit"). It runs in its own goroutine; ctx is cancelled when a
// newer version of the document arrives, and a planner that cannot stop
// early may ignore it: its result is then dropped.
type Planner func(ctx context.Context, p *lang.Program) (*Costs, diag.Diagnostics)

// Costs are a plan's numbers for one file.
type Costs struct {
	// Device is the device planned for ("h100-80gb"), empty when unknown;
	// DeviceMemory its memory in bytes, 0 when unknown.
	Device       string
	DeviceMemory int64
	// Precision is the activations' precision ("bf16"), empty when unknown.
	Precision string
	// Batch is the number of samples a step holds; 0 means the activation
	// figures are per sample.
	Batch int64
	// Layers has one entry per layer call written in the source.
	Layers []LayerCost
}

// LayerCost is the cost of one layer call. A call inside a repeat, or a
// family that expands into a network, sums over everything it expands
// into; Out is the shape of the last of them.
type LayerCost struct {
	// Range is the source of the call, as in lang.LayerCall.Range.
	Range diag.Range
	Layer string
	// Out is the output shape of one sample.
	Out []int64
	// Params is the number of trainable parameters.
	Params int64
	// ActivationBytes is what the layer keeps for the backward pass, for
	// Batch samples (or one, when Batch is 0).
	ActivationBytes int64
	// Copies is how many times the call is applied (a repeat's count).
	Copies int
}

// analysis is what the server knows about one version of a document.
type analysis struct {
	version int32
	text    string
	file    *ast.File
	prog    *lang.Program
	diags   diag.Diagnostics
	// checked is true once parse and check finished; costs is set once
	// the graph or the planner gave numbers.
	checked bool
	costs   *Costs
	// planned is true when the planner ran to the end.
	planned bool
}

// analyzer runs the stages of pipe over a document. Every stage runs under
// recover: a panic in the parser, the checker or the planner becomes a
// diagnostic at the top of the file and a log line, never a dead server.
type analyzer struct {
	schema  lang.Schema
	planner Planner
	log     hclog.Logger
}

// check parses and checks text, and computes the graph costs of every model
// that could be built; it is the part of the analysis that needs no device.
func (a *analyzer) check(name string, version int32, text string) *analysis {
	an := &analysis{version: version, text: text}
	src := []byte(text)
	a.guard("parser", &an.diags, func() {
		f, ds := lang.Parse(name, src)
		an.file = f
		an.diags = append(an.diags, ds...)
	})
	if an.file == nil {
		an.checked = true
		return an
	}
	a.guard("checker", &an.diags, func() {
		p, ds := lang.Check(an.file, a.schema)
		an.prog = p
		an.diags = append(an.diags, ds...)
		if p != nil && !ds.HasErrors() {
			// A sweep's parameter paths, resolved as pipe check does.
			_, sds := lang.SweepParams(p, src, a.schema)
			an.diags = append(an.diags, sds...)
		}
	})
	if an.prog != nil {
		a.guard("graph", nil, func() { an.costs = GraphCosts(an.prog) })
	}
	an.checked = true
	return an
}

// plan runs the planner over a checked analysis without errors and returns
// the analysis with the plan's diagnostics and costs added. It returns nil
// when ctx was cancelled before the planner finished.
func (a *analyzer) plan(ctx context.Context, an *analysis) *analysis {
	if a.planner == nil || an.prog == nil || an.diags.HasErrors() {
		return an
	}
	var costs *Costs
	var pds diag.Diagnostics
	a.guard("planner", &pds, func() { costs, pds = a.planner(ctx, an.prog) })
	if ctx.Err() != nil {
		return nil
	}
	out := *an
	out.diags = append(append(diag.Diagnostics(nil), an.diags...), pds...)
	out.diags.Sort()
	if costs != nil {
		out.costs = mergeCosts(an.costs, costs)
	}
	out.planned = true
	return &out
}

// guard runs fn, turning a panic into a diagnostic appended to ds.
func (a *analyzer) guard(stage string, ds *diag.Diagnostics, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("internal error", "stage", stage, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			if ds != nil {
				*ds = append(*ds, &diag.Diagnostic{Severity: diag.Error, Code: "internal",
					Summary: "internal error in the " + stage,
					Detail:  fmt.Sprintf("pipe's %s failed on this file (%v). Please report it with the file attached.", stage, r)})
			}
		}
	}()
	fn()
}

// mergeCosts keeps the planner's figures and adds the graph's entries for
// calls the planner does not mention.
func mergeCosts(graph, plan *Costs) *Costs {
	if graph == nil {
		return plan
	}
	out := *plan
	seen := map[[2]int]bool{}
	for _, l := range plan.Layers {
		seen[[2]int{l.Range.Start.Byte, l.Range.End.Byte}] = true
	}
	out.Layers = append([]LayerCost(nil), plan.Layers...)
	for _, l := range graph.Layers {
		if !seen[[2]int{l.Range.Start.Byte, l.Range.End.Byte}] {
			out.Layers = append(out.Layers, l)
		}
	}
	return &out
}

// layerAt returns the cost of the innermost layer call whose range holds
// the byte offset, or nil.
func (c *Costs) layerAt(off int) *LayerCost {
	if c == nil {
		return nil
	}
	var best *LayerCost
	for i := range c.Layers {
		l := &c.Layers[i]
		if off < l.Range.Start.Byte || off >= l.Range.End.Byte {
			continue
		}
		if best == nil || l.Range.End.Byte-l.Range.Start.Byte < best.Range.End.Byte-best.Range.Start.Byte {
			best = l
		}
	}
	return best
}

// GraphCosts computes the costs of every model of p from its graph alone
// (stdlib.BuildGraph): shapes, parameters, and the bytes each layer keeps
// for backward at the file's precision and batch when they are written
// down. It is what hover shows before, or without, a plan. A model that
// does not build contributes the layers built before the error.
func GraphCosts(p *lang.Program) *Costs {
	c := &Costs{Precision: "fp32"}
	if p == nil {
		return c
	}
	if v := p.Top.Arg("precision", "precision"); v != nil && !v.Auto && v.Str != "" {
		c.Precision = v.Str
	}
	if v := p.Top.Arg("device", "name"); v != nil && v.Str != "" {
		c.Device = v.Str
		if d := stdlib.Device(v.Str); d != nil {
			c.DeviceMemory = d.Memory
		}
	}
	if train := p.Block("train"); train != nil {
		if v := train.Arg("batch", "batch"); v != nil && !v.Auto && v.Int > 0 {
			c.Batch = v.Int
		}
	}
	elem := int64(4)
	if c.Precision == "fp16" || c.Precision == "bf16" {
		elem = 2
	}
	batch := max(c.Batch, 1)
	for _, m := range p.Models {
		g, _ := stdlib.BuildGraph(m)
		if g == nil {
			continue
		}
		sum := newLayerSums(c)
		for _, n := range g.Nodes {
			sum.add(n, n.Out, n.Params, satMul(satAdd(satMul(n.Saved, elem), n.SavedAux), batch))
		}
	}
	countCopies(p, c)
	return c
}

// countCopies sets Copies from the repeats around each call.
func countCopies(p *lang.Program, c *Costs) {
	copies := map[[2]int]int{}
	var walk func(ch *lang.Chain, k int)
	walk = func(ch *lang.Chain, k int) {
		if ch == nil {
			return
		}
		for _, n := range ch.Nodes {
			switch n := n.(type) {
			case *lang.LayerCall:
				copies[[2]int{n.Range.Start.Byte, n.Range.End.Byte}] += k
				for _, v := range n.Args {
					if v.Tensor != nil {
						walk(v.Tensor, k)
					}
				}
			case *lang.Repeat:
				walk(n.Body, satMulInt(k, n.Count))
			}
		}
	}
	for _, m := range p.Models {
		for _, s := range m.Stmts {
			walk(s.Chain, 1)
		}
	}
	for i := range c.Layers {
		l := &c.Layers[i]
		l.Copies = max(1, copies[[2]int{l.Range.Start.Byte, l.Range.End.Byte}])
	}
}

const maxInt64 = int64(^uint64(0) >> 1)

func satAdd(a, b int64) int64 {
	if a < 0 || b < 0 {
		return 0
	}
	if a > maxInt64-b {
		return maxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > maxInt64/b {
		return maxInt64
	}
	return a * b
}

func satMulInt(a, b int) int {
	const maxInt = int(^uint(0) >> 1)
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > maxInt/b {
		return maxInt
	}
	return a * b
}
