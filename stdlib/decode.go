package stdlib

import (
	"pipe/diag"
	"pipe/lang"
	"pipe/spec"
)

// DecodeSource decodes a checked source block into its typed spec, once,
// so that what reads the data never reads the block. A kind the schema
// does not know (the checker refuses it) gives a Source without a kind
// spec, which dataset.Open reports.
func DecodeSource(b *lang.Block) (*spec.Source, diag.Diagnostics) {
	s := spec.NewSource(b.Name(), b.Label("kind"))
	if s == nil {
		s = &spec.Source{Name: b.Name(), Kind: b.Label("kind")}
	}
	s.At = WhereOf(b)
	ds := lang.Decode(b, s)
	if k := s.KindSpec(); k != nil {
		ds = append(ds, lang.Decode(b, k)...)
	}
	return s, ds
}

// WhereOf is where block b was written: its ranges, its name's and each
// field's.
func WhereOf(b *lang.Block) spec.Where {
	if b == nil {
		return spec.Where{}
	}
	w := spec.Where{Range: b.Range, KindRange: b.KindRange}
	for _, l := range b.Labels {
		if l.Name == "name" {
			r := l.Range
			w.NameRange = &r
			break
		}
	}
	if len(b.Fields) > 0 {
		w.Fields = make(map[string]diag.Range, len(b.Fields))
		for _, f := range b.Fields {
			if _, dup := w.Fields[f.Name]; !dup { // the first, as Block.Field finds it
				w.Fields[f.Name] = f.Range
			}
		}
	}
	return w
}

// Program is a checked program decoded for the planner and the stages
// after it: its blocks as typed specs, and its models, whose graphs Graph
// builds. The planner and the run loop take it instead of the syntax
// tree.
type Program struct {
	Spec   *spec.Program
	models map[string]*lang.Model
}

// Decode decodes a checked program's top-level fields, sources, device
// blocks, train (with its gan settings), evaluate, predict, serve and
// sweep blocks into specs, once, after lang.Check. Its diagnostics are errors
// only where the schema and the specs disagree.
func Decode(prog *lang.Program) (*Program, diag.Diagnostics) {
	out := &Program{Spec: &spec.Program{Name: prog.Name}, models: map[string]*lang.Model{}}
	var ds diag.Diagnostics
	if prog.File != nil {
		out.Spec.File = prog.File.Name
	}
	if prog.Top != nil {
		if v := prog.Top.Field("seed").First(); v != nil {
			seed := v.Int
			out.Spec.Seed = &seed
		}
		out.Spec.At = WhereOf(prog.Top)
		ds = append(ds, lang.Decode(prog.Top, out.Spec)...)
	}
	for _, b := range prog.BlocksOf("source") {
		s, sds := DecodeSource(b)
		ds = append(ds, sds...)
		out.Spec.Sources = append(out.Spec.Sources, s)
	}
	for _, m := range prog.Models {
		out.models[m.Name] = m
		sm := &spec.Model{Name: m.Name, NameRange: m.NameRange, InputRange: m.InputRange}
		for _, c := range m.Calls() {
			sm.Calls = append(sm.Calls, spec.Call{Name: c.Name, NameRange: c.NameRange})
		}
		out.Spec.Models = append(out.Spec.Models, sm)
	}
	for _, b := range prog.BlocksOf("device") {
		d := &spec.Device{Name: b.Name(), At: WhereOf(b)}
		ds = append(ds, lang.Decode(b, d)...)
		out.Spec.Devices = append(out.Spec.Devices, d)
	}
	if g := prog.GAN(); g != nil {
		out.Spec.GAN = &spec.GAN{Generator: g.Generator.Name, Discriminator: g.Discriminator.Name, Conditional: g.Conditional,
			Adversarial: g.Adversarial, AdvWeight: g.AdvWeight, L1: g.L1, DSteps: int64(g.DSteps)}
	}
	if b := prog.Block("serve"); b != nil {
		s := &spec.Serve{At: WhereOf(b)}
		ds = append(ds, lang.Decode(b, s)...)
		out.Spec.Serve = s
	}
	if b := prog.Block("train"); b != nil {
		t := &spec.Train{Epochs: 1, At: WhereOf(b)}
		ds = append(ds, lang.Decode(b, t)...)
		out.Spec.Train = t
	}
	if b := prog.Block("evaluate"); b != nil {
		e := &spec.Evaluate{At: WhereOf(b)}
		ds = append(ds, lang.Decode(b, e)...)
		out.Spec.Evaluate = e
	}
	if b := prog.Block("predict"); b != nil {
		p := &spec.Predict{At: WhereOf(b)}
		ds = append(ds, lang.Decode(b, p)...)
		out.Spec.Predict = p
	}
	if b := prog.Block("sweep"); b != nil {
		sw := &spec.Sweep{Parallel: 1, Metric: "loss", Sampler: "tpe", Gamma: 0.25, EarlyStop: "none", Rung: 1, Eta: 3, At: WhereOf(b)}
		ds = append(ds, lang.Decode(b, sw)...)
		if sw.Goal == "" {
			sw.Goal = "max"
			switch sw.Metric {
			case "loss", "mae", "rmse":
				sw.Goal = "min"
			}
		}
		out.Spec.Sweep = sw
	}
	return out, ds
}

// Graph builds the graph of the named model; nil without diagnostics when
// the program has no such model.
func (p *Program) Graph(model string) (*Graph, diag.Diagnostics) {
	m := p.models[model]
	if m == nil {
		return nil, nil
	}
	return BuildGraph(m)
}
