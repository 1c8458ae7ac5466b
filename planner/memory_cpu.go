package planner

import (
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// The native engine's memory: the engine lays every tensor of a training
// step out in one arena before the first step; its cost model (cost.Arena)
// lays the step out as the engine does, and the plan counts parameters,
// gradients, optimizer state, the arena's peak split into activations,
// their gradients and the input, the workers' scratch, the evaluation
// arena and the loaders' batches (memory_plan_test.go holds them to it).
// Details: docs/design/native-memory.md (the last section).

// cpuModel is the planner's view of an engine's arena: the engine's
// layout and what the planner derives from it once.
type cpuModel struct {
	arena cost.Arena
	// overhead is the step's peak without checkpointing less the chain's
	// kept memory, per sample: what solve takes off the programme's budget.
	overhead int64
	// fixedTrain and fixedEval are the per-channel buffers of the training
	// step and of evaluation, in bytes: the batch does not scale them.
	fixedTrain, fixedEval int64
	low                   int64 // the chain's least peak, once computed
}

// stepMem is a training step's memory per sample (cost.Step).
type stepMem struct {
	peak, saved, input int64
}

// train lays out a training step with the checkpoint segments segs.
func (cm *cpuModel) train(segs []segment) stepMem {
	s := cm.arena.Train(segs)
	return stepMem{peak: s.Peak, saved: s.Saved, input: s.Input}
}

// newCPUCostModel prices g for an engine that lays its step out in an
// arena (the native engine), with the plan's fusion groups, loss,
// optimizer buffers and worker threads; nil when the engine has no arena.
func newCPUCostModel(e cost.Engine, g *stdlib.Graph, s cost.Setup, buffers int64) *costModel {
	s.Device, s.Precision = plan.BackendCPU, plan.Precision{ActivationBytes: 4}
	mem := e.Memory(g, s)
	if mem.Arena == nil {
		return nil
	}
	m := &costModel{backend: plan.BackendCPU, elem: 4, buffers: buffers, params: g.Params()}
	c := newChain(g, mem)
	c.finish()
	m.ch = c
	m.perNode = make([]int64, len(g.Nodes))
	for i := range m.perNode {
		m.perNode[i] = c.stored(i)
	}
	cm := &cpuModel{arena: mem.Arena}
	m.cpu = cm
	base := cm.train(nil)
	m.baseline = base.peak
	cm.overhead = base.peak - c.baseline()
	m.eval, cm.fixedEval = mem.Arena.Eval()
	cm.fixedTrain = mem.Arena.Fixed()
	p := m.params
	m.static.parameters = add(mul(p, 4), mem.Arena.State())
	m.static.gradients = mul(p, 4)
	m.static.optimizer = mul(p, mul(4, buffers))
	m.static.scratch = mem.Arena.Scratch()
	m.static.fixed = add(cm.fixedTrain, cm.fixedEval)
	return m
}

// chainMin is the checkpoint programme's least peak, computed once.
func (cm *cpuModel) chainMin(c *chain) int64 {
	if cm.low == 0 {
		cm.low = c.minPeak()
	}
	return cm.low
}
