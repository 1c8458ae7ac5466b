package workflow

import (
	"context"
	"strings"

	"pipe/diag"
	"pipe/planner/plan"
	"pipe/spec"
	"pipe/stdlib"
)

// decideRun makes a run's choices on top of the planner's: on GPUs, data
// parallelism defaults to every GPU present unless the plan names one
// (cuda:N), where the engine trains data parallel; and when device auto
// found a GPU and engine auto took an engine with a worker, the worker
// must start, else the CPU trains instead (FellBack). The planner cannot
// make either choice: it knows the host, not the worker's Python.
func (w *Workflow) decideRun(ctx context.Context, prog *stdlib.Program, req Request, f facts, out *Planned,
	p *plan.Plan, ds diag.Diagnostics) (*plan.Plan, diag.Diagnostics) {
	if p != nil && p.Backend == plan.BackendGPU && traits(p.EngineName()).DataParallel && req.NProcPerNode == 0 &&
		!strings.HasPrefix(p.Device.Name, "cuda:") && len(f.host.GPUs) > 1 {
		p, ds = w.plan(ctx, prog, req, f, req.Device, len(f.host.GPUs))
	}
	if p != nil && p.Backend == plan.BackendGPU && p.Device.Origin == "local" && p.Engine.Requested == "auto" &&
		req.Device == "" && deviceAuto(prog.Spec) {
		if probe := w.prober(p.EngineName()); probe != nil && out.Runtime == nil { // not asked yet (Plan may plan twice)
			rt, err := probe(w.python)
			if err != nil {
				out.FellBack = &Fallback{Device: p.Device.Name, Err: err}
				return w.plan(ctx, prog, req, f, "cpu", 0)
			}
			out.Runtime = &rt
		}
	}
	return p, ds
}

// deviceAuto says the file leaves the device to pipe (no device field, or
// device auto).
func deviceAuto(prog *spec.Program) bool {
	return prog.Device == nil || prog.Device.IsAuto
}
