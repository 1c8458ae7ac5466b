package native

import (
	"fmt"

	"pipe/engine"
	"pipe/planner/cost"
	"pipe/planner/plan"
)

// The native engine as the planner sees it: its descriptor (cost.Engine
// and cost.Explainer), registered as the package starts, beside how a run
// starts it (it needs nothing: it computes in this process).

func init() {
	cost.Register(Cost{})
	engine.Register(engine.Registration{Name: plan.EngineNative, New: func(engine.Setup) engine.Backend { return Backend{} }})
}

var (
	_ cost.Explainer  = Cost{}
	_ cost.HostProber = Cost{}
)

// ProbeHost implements cost.HostProber: the int8 kernel this CPU runs and
// what it buys, and the kernels the products run on.
func (Cost) ProbeHost() cost.Host { return cost.Host{Int8: Int8Kernel(), Kernels: BLASKernels()} }

// Name implements cost.Engine.
func (Cost) Name() string { return plan.EngineNative }

// Traits implements cost.Engine: the CPU, in pipe's own process, fp32
// training, int8 inference, dataset's batches in the training budget.
func (Cost) Traits() cost.Traits {
	return cost.Traits{Devices: []string{plan.BackendCPU}, Auto: []string{plan.BackendCPU},
		Int8: true, InProcess: true, LoaderInBudget: true, DatasetSamples: true}
}

// Chosen implements cost.Explainer.
func (Cost) Chosen(dev plan.Device, auto bool, blas string) string {
	why := "native as written: pipe's own CPU executor."
	if auto {
		why = "engine auto on the CPU: pipe's native engine (compiled kernels over OpenBLAS, no Python)."
	}
	if blas != "" {
		why += " Its products run on " + blas + "."
	}
	return why
}

// Refused implements cost.Explainer.
func (Cost) Refused(dev plan.Device) (summary, detail string) {
	return "the native engine runs on the CPU only",
		fmt.Sprintf("%s is a GPU; pipe's native engine computes on the CPU. Write engine torch (or auto) to train on it with PyTorch, or plan for the CPU with --device cpu.", dev.Name)
}
