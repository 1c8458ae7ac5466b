package workflow

import (
	"fmt"

	"pipe/engine"
	"pipe/engine/costs"
	"pipe/planner/cost"
	"pipe/planner/plan"
)

// RunEngines returns the engine a run's plan names, set up for this
// process's place (its plan gives the world's size) and checked before
// any data is read: an engine that computes in a worker has its worker
// asked once (device auto may have asked already) whether it sees the
// plan's GPUs. No engine of the plan's name among those given leaves the
// list empty, and the run reports it.
func (w *Workflow) RunEngines(pl *Planned, at engine.Place) ([]engine.Backend, error) {
	p := pl.Plan
	at.NProcPerNode, at.NNodes = p.Distributed.NProcPerNode, p.Distributed.NNodes
	if probe := w.prober(p.EngineName()); probe != nil {
		if err := w.checkRuntime(pl, probe); err != nil {
			if p.Backend == plan.BackendGPU && p.Device.Origin == "profile" && pl.localGPUs == 0 {
				// The file names a GPU this machine lacks (nvidia-smi lists
				// none, and the engine cannot use one): that is the news,
				// not the engine's complaint.
				return nil, fmt.Errorf("the plan is for %s, a GPU profile, and this machine has no GPU that pipe can use (nvidia-smi lists none; the %s engine: %v): run it where that GPU is, or train here on the CPU with --device cpu", p.Device.Name, p.EngineName(), err)
			}
			return nil, err
		}
	}
	var out []engine.Backend
	for _, b := range w.engines(engine.Setup{Python: w.python, Log: w.log, Place: at}) {
		if b.Name() == p.EngineName() {
			out = append(out, b)
		}
	}
	return out, nil
}

// checkRuntime asks the plan's engine's worker what it has unless it was
// asked, and refuses a GPU plan that it cannot run.
func (w *Workflow) checkRuntime(pl *Planned, probe func(string) (engine.Runtime, error)) error {
	p, name := pl.Plan, pl.Plan.EngineName()
	if pl.Runtime == nil {
		rt, err := probe(w.python)
		if err != nil {
			return err
		}
		pl.Runtime = &rt
	}
	rt := *pl.Runtime
	if p.Backend == plan.BackendGPU && !rt.GPU {
		return fmt.Errorf("the plan is for a GPU (%s), but the %s of %s (%s) sees no CUDA device; run where there is one, or plan for the CPU with --device cpu",
			p.Device.Name, name, rt.Executable, rt.Version)
	}
	if p.Backend == plan.BackendGPU && p.Distributed.NProcPerNode > rt.GPUs {
		return fmt.Errorf("--nproc-per-node %d asks for %d GPUs, and %s sees %d on this machine",
			p.Distributed.NProcPerNode, p.Distributed.NProcPerNode, name, rt.GPUs)
	}
	w.log.Info(name+" engine", "python", rt.Executable, name, rt.Version, "cuda", rt.GPU, "gpus", rt.GPUs)
	return nil
}

// Engine is the engine that loads a trained model for the plan: pipe
// export reads the weights with the engine auto takes on the CPU (one
// that computes in this process, whatever trained them); pipe serve runs
// the plan's engine, once its worker starts.
func (w *Workflow) Engine(pl *Planned) (engine.Backend, error) {
	name := pl.Plan.EngineName()
	if pl.purpose == ForExport {
		name = autoOn(plan.BackendCPU)
	}
	r, ok := engine.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no engine named %s is linked into this pipe", name)
	}
	if probe := w.prober(name); probe != nil {
		if _, err := probe(w.python); err != nil {
			return nil, err
		}
	}
	return r.New(engine.Setup{Python: w.python, Log: w.log}), nil
}

// Traits is what the plan's engine says of itself.
func (pl *Planned) Traits() cost.Traits { return traits(pl.Plan.EngineName()) }

// prober is how the engine named name asks its worker what it has (the
// workflow's WithProbe where given), nil for an engine without a worker.
func (w *Workflow) prober(name string) func(string) (engine.Runtime, error) {
	r, ok := engine.Lookup(name)
	switch {
	case !ok || r.Probe == nil:
		return nil
	case w.probe != nil:
		return w.probe
	}
	return r.Probe
}

// traits is what the engine named name says of itself (none for an
// engine not linked in).
func traits(name string) cost.Traits {
	for _, e := range costs.Engines() {
		if e.Name() == name {
			return e.Traits()
		}
	}
	return cost.Traits{}
}

// autoOn is the engine engine auto takes on the device kind, "" when none.
func autoOn(kind string) string {
	for _, e := range costs.Engines() {
		for _, k := range e.Traits().Auto {
			if k == kind {
				return e.Name()
			}
		}
	}
	return ""
}
