package lsp

import (
	"pipe/lang"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// CostsFromPlan turns a plan into the costs hover shows: the plan's
// device, activation precision and batch, and its per-node figures summed
// per layer call. A plan names its nodes as the model's graph does, so the
// graph gives each node the source range of the call that made it. It
// returns nil when p is nil or names a model prog does not have.
func CostsFromPlan(prog *lang.Program, p *plan.Plan) *Costs {
	if p == nil || prog == nil {
		return nil
	}
	m := prog.Model(p.Model)
	if m == nil {
		return nil
	}
	g, _ := stdlib.BuildGraph(m)
	if g == nil {
		return nil
	}
	byName := make(map[string]*stdlib.Node, len(g.Nodes))
	for _, n := range g.Nodes {
		byName[n.Name] = n
	}
	c := &Costs{
		Device:       p.Device.Name,
		DeviceMemory: p.Device.Memory,
		Precision:    p.Precision.Activations,
		Batch:        p.BatchSize,
	}
	index := map[[2]int]int{}
	for _, l := range p.Layers {
		n := byName[l.Name]
		if n == nil || n.Op == "input" || n.Range.IsZero() {
			continue
		}
		key := [2]int{n.Range.Start.Byte, n.Range.End.Byte}
		i, ok := index[key]
		if !ok {
			i = len(c.Layers)
			index[key] = i
			c.Layers = append(c.Layers, LayerCost{Range: n.Range, Layer: n.Layer})
		}
		lc := &c.Layers[i]
		lc.Out = l.Out
		lc.Params = satAdd(lc.Params, l.Params)
		lc.ActivationBytes = satAdd(lc.ActivationBytes, l.ActivationBytes)
	}
	countCopies(prog, c)
	return c
}
