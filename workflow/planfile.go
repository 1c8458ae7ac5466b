package workflow

import (
	"context"

	"pipe/diag"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
)

// Verdict is what planning a plan file again found.
type Verdict int

const (
	// Runnable: the plan may run as it is.
	Runnable Verdict = iota
	// SourceChanged: the file changed since the plan was made.
	SourceChanged
	// Unplannable: planned again, it has errors other than not fitting.
	Unplannable
	// Moved: planned again on this machine, it no longer fits or needs
	// another accumulation; it was edited, or made on another machine.
	Moved
	// NoFit: the plan says itself that it does not fit.
	NoFit
)

// Recheck is a plan file held against its source and planned again.
type Recheck struct {
	Verdict Verdict
	// Changed is Plan.Verify's error when the source changed.
	Changed error
	// Again is the plan made again for the file's device, batch, engine
	// and devices with this machine's facts, and Diags its diagnostics.
	Again *plan.Plan
	Diags diag.Diagnostics
	// Planned is the plan file to run, when the verdict is Runnable.
	Planned *Planned
}

// Recheck holds a plan loaded from a file (pipe run --plan) against the
// source it was made from and plans it again with a run's facts: a plan
// edited by hand, or made on another machine, that no longer fits is
// refused before anything is allocated.
func (w *Workflow) Recheck(ctx context.Context, prog *lang.Program, src []byte, p *plan.Plan) *Recheck {
	if err := p.Verify(src); err != nil {
		return &Recheck{Verdict: SourceChanged, Changed: err}
	}
	req := Request{Purpose: ForRun, Source: src, Device: p.Device.Name, Batch: p.BatchSize, Engine: p.EngineName(),
		NProcPerNode: p.Distributed.NProcPerNode, NNodes: p.Distributed.NNodes}
	if p.StepTime.Network == "network" {
		req.Network = p.StepTime.NetworkBandwidth
	}
	dec, dds := decode(prog)
	if dec == nil {
		return &Recheck{Verdict: Unplannable, Diags: dds}
	}
	again, ds := w.plan(ctx, dec, req, w.gather(dec.Spec, ForRun), req.Device, 0)
	r := &Recheck{Again: again, Diags: append(ds, dds...)}
	switch {
	case again == nil || HasOtherErrors(r.Diags):
		r.Verdict = Unplannable
	case !again.Fits || again.AccumulationSteps != p.AccumulationSteps:
		r.Verdict = Moved
	case !p.Fits:
		r.Verdict = NoFit
	default:
		r.Planned = &Planned{Plan: p, Program: dec, purpose: ForRun, localGPUs: -1}
	}
	return r
}

// HasDataErrors reports that the errors are the data's, as the run
// would give them (a source it cannot read, samples that do not fit the
// model's input), besides "does not fit": the plan is whole, and the run
// would refuse it.
func HasDataErrors(ds diag.Diagnostics) bool {
	data := false
	for _, d := range ds.Errs() {
		switch d.Code {
		case run.CodeData, run.CodeShape:
			data = true
		case planner.CodeNoFit:
		default:
			return false
		}
	}
	return data
}

// HasOtherErrors reports an error that is not "does not fit".
func HasOtherErrors(ds diag.Diagnostics) bool {
	for _, d := range ds.Errs() {
		if d.Code != planner.CodeNoFit {
			return true
		}
	}
	return false
}
