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
	sum := newLayerSums(c)
	for _, l := range p.Layers {
		if n := byName[l.Name]; n != nil {
			sum.add(n, l.Out, l.Params, l.ActivationBytes)
		}
	}
	countCopies(prog, c)
	return c
}

// layerSums adds up per-node figures per layer call: the nodes a call
// expands into share its source range.
type layerSums struct {
	c     *Costs
	index map[[2]int]int
}

func newLayerSums(c *Costs) *layerSums { return &layerSums{c: c, index: map[[2]int]int{}} }

// add counts one node of the graph; the input node and nodes without a
// source range are left out.
func (s *layerSums) add(n *stdlib.Node, out []int64, params, activationBytes int64) {
	if n.Op == "input" || n.Range.IsZero() {
		return
	}
	key := [2]int{n.Range.Start.Byte, n.Range.End.Byte}
	i, ok := s.index[key]
	if !ok {
		i = len(s.c.Layers)
		s.index[key] = i
		s.c.Layers = append(s.c.Layers, LayerCost{Range: n.Range, Layer: n.Layer})
	}
	lc := &s.c.Layers[i]
	lc.Out = out
	lc.Params = satAdd(lc.Params, params)
	lc.ActivationBytes = satAdd(lc.ActivationBytes, activationBytes)
}
