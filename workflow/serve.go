package workflow

import (
	"context"
	"fmt"

	"pipe/exec"
	"pipe/lang"
)

// ServeWorkers loads the model trained at path once for each of the
// serving plan's workers, on the engine Engine gives, and makes them int8
// when the serve block asks for it: each calibrated on the same first
// training batches (read once), as a run's predict in int8 is. It returns
// what the first worker's quantisation did (nil in fp32). On an error
// every worker loaded is closed; a checkpoint of another model wraps
// exec.ErrCheckpointMismatch.
func (w *Workflow) ServeWorkers(pl *Planned, prog *lang.Program, path string) ([]*exec.Trained, *exec.QuantReport, error) {
	sp := pl.Plan.Serve
	backend, err := w.Engine(pl)
	if err != nil {
		return nil, nil, err
	}
	workers := make([]*exec.Trained, 0, sp.Workers)
	closeAll := func() {
		for _, t := range workers {
			t.Close()
		}
	}
	for range sp.Workers {
		t, err := exec.LoadTrained(pl.Plan, prog, path, backend, int(sp.MaxBatch), sp.ThreadsPerWorker)
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
	var first *exec.QuantReport
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
