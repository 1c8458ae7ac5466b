package workflow

import (
	"fmt"

	"pipe/engine"
	"pipe/engine/native"
	"pipe/engine/torch"
	"pipe/planner/plan"
)

// TorchSetup is how a run starts the torch engine's workers beyond what
// the plan says: this machine's place among several (pipe run's flags).
type TorchSetup struct {
	NodeRank   int
	MasterAddr string
	MasterPort int
	// LocalRank is this process's first device on its machine, under a
	// launcher that starts a pipe per device (torchrun's LOCAL_RANK);
	// AgentStore says the launcher's agent holds the rendezvous store.
	LocalRank  int
	AgentStore bool
}

// RunEngines returns the engine a run's plan names, set up and checked
// before any data is read: the torch engine's Python is asked once (device
// auto may have asked already) whether its torch sees the plan's GPUs.
// No engine of the plan's name among those given leaves the list empty,
// and the run reports it.
func (w *Workflow) RunEngines(pl *Planned, ts TorchSetup) ([]engine.Backend, error) {
	p := pl.Plan
	tb := torch.Backend{Python: w.python, NProcPerNode: p.Distributed.NProcPerNode, NNodes: p.Distributed.NNodes,
		NodeRank: ts.NodeRank, MasterAddr: ts.MasterAddr, MasterPort: ts.MasterPort, LocalRank: ts.LocalRank, AgentStore: ts.AgentStore, Log: w.log}
	if p.EngineName() == plan.EngineTorch {
		if err := w.checkTorch(pl); err != nil {
			if p.Backend == plan.BackendGPU && p.Device.Origin == "profile" && pl.localGPUs == 0 {
				// The file names a GPU this machine lacks (nvidia-smi lists
				// none, and torch cannot use one): that is the news, not
				// the torch engine's complaint.
				return nil, fmt.Errorf("the plan is for %s, a GPU profile, and this machine has no GPU that pipe can use (nvidia-smi lists none; the torch engine: %v): run it where that GPU is, or train here on the CPU with --device cpu", p.Device.Name, err)
			}
			return nil, err
		}
	}
	var out []engine.Backend
	for _, b := range w.engines(tb) {
		if b.Name() == p.EngineName() {
			out = append(out, b)
		}
	}
	return out, nil
}

// checkTorch probes the torch engine unless it was, and refuses a GPU
// plan that its torch cannot run.
func (w *Workflow) checkTorch(pl *Planned) error {
	p := pl.Plan
	if pl.Torch == nil {
		info, err := w.probe(w.python)
		if err != nil {
			return err
		}
		pl.Torch = &info
	}
	info := *pl.Torch
	if p.Backend == plan.BackendGPU && !info.CUDA {
		return fmt.Errorf("the plan is for a GPU (%s), but the torch of %s (%s) sees no CUDA device; run where there is one, or plan for the CPU with --device cpu",
			p.Device.Name, info.Executable, info.Torch)
	}
	if p.Backend == plan.BackendGPU && p.Distributed.NProcPerNode > info.CUDADevices {
		return fmt.Errorf("--nproc-per-node %d asks for %d GPUs, and torch sees %d on this machine",
			p.Distributed.NProcPerNode, p.Distributed.NProcPerNode, info.CUDADevices)
	}
	w.log.Info("torch engine", "python", info.Executable, "torch", info.Torch, "cuda", info.CUDA, "gpus", info.CUDADevices)
	return nil
}

// Engine is the engine that loads a trained model for the plan: pipe
// export reads the native engine's weights whatever trained them; pipe
// serve runs the plan's engine, the torch one once its Python starts.
func (w *Workflow) Engine(pl *Planned) (engine.Backend, error) {
	if pl.purpose == ForExport || pl.Plan.EngineName() == plan.EngineNative {
		return native.Backend{}, nil
	}
	tb := torch.Backend{Python: w.python, Log: w.log}
	if _, err := w.probe(tb.Python); err != nil {
		return nil, err
	}
	return tb, nil
}
