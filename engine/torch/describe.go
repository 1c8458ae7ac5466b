package torch

import (
	"fmt"

	"pipe/engine"
	"pipe/planner/cost"
	"pipe/planner/plan"
)

// The torch engine as the planner sees it: its descriptor (cost.Engine
// and cost.Explainer), registered as the package starts, beside how a run
// starts it and asks its Python what it has.

func init() {
	cost.Register(Cost{})
	engine.Register(engine.Registration{Name: plan.EngineTorch, New: start, Probe: probe, SharedMemory: SharedMemoryBytes,
		Version: &engine.VersionFlag{Check: CheckVersion,
			Usage: "price a GPU plan for this torch (1.13, 2.11) instead of the one it assumes (the plan's first line names it)"}})
}

// start is the engine set up as s says.
func start(s engine.Setup) engine.Backend {
	p := s.Place
	return Backend{Python: s.Python, Log: s.Log, NProcPerNode: p.NProcPerNode, NNodes: p.NNodes, NodeRank: p.NodeRank,
		MasterAddr: p.MasterAddr, MasterPort: p.MasterPort, LocalRank: p.LocalRank, AgentStore: p.AgentStore}
}

// probe is Probe in the contract's words.
func probe(python string) (engine.Runtime, error) {
	info, err := Probe(python)
	if err != nil {
		return engine.Runtime{}, err
	}
	return engine.Runtime{Executable: info.Executable, Version: info.Torch, GPU: info.CUDA, GPUs: info.CUDADevices}, nil
}

var (
	_ cost.Explainer  = Cost{}
	_ cost.HostProber = Cost{}
	_ cost.Processor  = Cost{}
)

// Name implements cost.Engine.
func (Cost) Name() string { return plan.EngineTorch }

// Traits implements cost.Engine: CUDA GPUs (auto's choice there) and the
// CPU, in a PyTorch worker, data parallel, bf16 autocast on the CPU too.
func (Cost) Traits() cost.Traits {
	return cost.Traits{Devices: []string{plan.BackendCPU, plan.BackendGPU}, Auto: []string{plan.BackendGPU},
		DataParallel: true, CPUAutocast: true, DeviceData: true, InputSlots: slots}
}

// Chosen implements cost.Explainer.
func (Cost) Chosen(dev plan.Device, auto bool, blas string) string {
	switch {
	case auto:
		return fmt.Sprintf("engine auto on a GPU (%s): PyTorch computes, driven by pipe with this plan; pipe's native engine runs on the CPU only.", dev.Name)
	case dev.Kind == plan.BackendGPU:
		return fmt.Sprintf("torch as written: PyTorch computes on %s, driven by pipe with this plan.", dev.Name)
	}
	return "torch as written: PyTorch computes on the CPU, driven by pipe with this plan (it also gives bf16 autocast on the CPU)."
}

// Refused implements cost.Explainer; the torch engine runs on every
// device kind.
func (Cost) Refused(dev plan.Device) (summary, detail string) {
	return "the torch engine does not run on " + dev.Name, "Plan for a CUDA GPU or the CPU with --device."
}
