package workflow

import (
	"context"
	"fmt"

	"pipe/diag"
	"pipe/engine"
	"pipe/run"
)

// ServeWorkers loads the model trained at path once for each of the
// serving plan's workers, on the engine Engine gives, and makes them int8
// when the serve block asks for it: each calibrated on the same first
// training batches (read once), as a run's predict in int8 is. It returns
// what the first worker's quantisation did (nil in fp32). On an error
// every worker loaded is closed; a checkpoint of another model wraps
// run.ErrCheckpointMismatch.
func (w *Workflow) ServeWorkers(pl *Planned, path string) ([]*run.Trained, *engine.QuantReport, error) {
	sp := pl.Plan.Serve
	if pl.Program == nil {
		return nil, nil, fmt.Errorf("the file did not decode into specs; pipe check %s says why", pl.Plan.File)
	}
	backend, err := w.Engine(pl)
	if err != nil {
		return nil, nil, err
	}
	workers := make([]*run.Trained, 0, sp.Workers)
	closeAll := func() {
		for _, t := range workers {
			t.Close()
		}
	}
	for range sp.Workers {
		t, err := run.LoadTrained(pl.Plan, pl.Program, path, backend, int(sp.MaxBatch), sp.ThreadsPerWorker)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		workers = append(workers, t)
	}
	if sp.Precision != "int8" || len(workers) == 0 {
		return workers, nil, nil
	}
	calib, err := workers[0].CalibrationBatches(context.Background(), "", int(max(sp.CalibrateBatches, 1)))
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("int8 calibration: %w", err)
	}
	var first *engine.QuantReport
	for i, t := range workers {
		rep, err := t.QuantizeInt8(calib)
		if err != nil {
			closeAll()
			return nil, first, err
		}
		if i == 0 {
			first = rep
		}
	}
	return workers, first, nil
}

// RebuildServeWorker builds old's model afresh with the weights it was
// loaded with, on the engine Engine gives, made int8 as ServeWorkers
// makes it when the serve block asks: pipe serve calls it for a worker
// whose process died.
func (w *Workflow) RebuildServeWorker(pl *Planned, old *run.Trained) (*run.Trained, error) {
	backend, err := w.Engine(pl)
	if err != nil {
		return nil, err
	}
	t, err := old.Rebuild(backend)
	if err != nil || pl.Plan.Serve.Precision != "int8" {
		return t, err
	}
	calib, err := t.CalibrationBatches(context.Background(), "", int(max(pl.Plan.Serve.CalibrateBatches, 1)))
	if err == nil {
		_, err = t.QuantizeInt8(calib)
	}
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("int8: %w", err)
	}
	return t, nil
}

// Servability is whether a serving plan can serve.
type Servability int

const (
	// Servable: the workers fit and nothing else is wrong.
	Servable Servability = iota
	// Unservable: the file cannot be planned.
	Unservable
	// TwoModels: a gan-mode file trains two models against each other,
	// and serving is planned for one.
	TwoModels
	// ServeNoFit: the serving workers do not fit the device.
	ServeNoFit
)

// Servability says whether pl, planned ForServe with diagnostics ds, can
// be served: training's memory does not matter here, serving's does.
func (pl *Planned) Servability(ds diag.Diagnostics) Servability {
	p := pl.Plan
	switch {
	case p == nil || HasOtherErrors(ds):
		return Unservable
	case p.Serve == nil:
		return TwoModels
	case !p.Serve.Fits:
		return ServeNoFit
	}
	return Servable
}
