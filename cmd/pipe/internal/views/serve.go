package views

import (
	"fmt"
	"io"
	"net"

	"pipe/engine"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/serve"
)

// Int8 says what quantising a serving worker's model did.
func Int8(w io.Writer, rep *engine.QuantReport) {
	fmt.Fprintf(w, "pipe serve: int8: %d layers quantised per channel, calibrated on %d batches (%s); weights %s -> %s\n",
		rep.Int8Layers(), rep.CalibBatches, rep.Calibration, planner.FormatBytes(rep.WeightBytesFP32), planner.FormatBytes(rep.WeightBytesInt8))
}

// Listening says where pipe serve answers the file display's model (from
// the checkpoint at path), and how.
func Listening(w io.Writer, display string, p *plan.Plan, path string, addr net.Addr, cfg serve.Config) {
	sp := p.Serve
	batching := fmt.Sprintf("max_batch %d, max_wait %s", cfg.MaxBatch, cfg.MaxWait)
	if !cfg.Batching {
		batching = "batching off"
	}
	fmt.Fprintf(w, "pipe serve: %s (model %s from %s) on http://%s: %s, %s × %s, queue %d; POST /v1/predict, GET /healthz /readyz /metrics\n",
		display, p.Model, path, addr, batching, Count(sp.Workers, "worker", "workers"), Count(sp.ThreadsPerWorker, "thread", "threads"), cfg.Queue)
}
