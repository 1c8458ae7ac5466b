package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"pipe/run"
	"pipe/sweep"
)

// sweepEpochPrefix starts the line pipe run --sweep-gate writes at each
// epoch's end; the rest of the line is a sweep.Epoch in JSON.
const sweepEpochPrefix = "pipe-sweep-epoch "

// sweepGate wraps a run's Epoch hook for pipe sweep: after each epoch it
// writes the epoch's validation results on out and, unless the epoch is
// the last of epochs, waits for a line on in: "go" trains on, "stop" (or
// the end of in: the sweep is gone) cancels the run, which writes its
// checkpoint and exits as an interrupted run does. The sweep's early
// stopping so decides at the epoch boundary itself, whatever the speed
// of the trial or of the sweep.
func sweepGate(next func(run.EpochResult), out io.Writer, in io.Reader, epochs int, cancel func()) func(run.EpochResult) {
	answers := bufio.NewReader(in)
	return func(e run.EpochResult) {
		if next != nil {
			next(e)
		}
		rep := sweep.Epoch{Epoch: e.Epoch, Step: e.Step, Last: e.Epoch >= epochs, Metrics: map[string]float64{}}
		if e.Val != nil {
			// JSON has no NaN: a value that is not finite is left out,
			// which the sweep reads as no value.
			if l := e.Val.Loss; !math.IsNaN(l) && !math.IsInf(l, 0) {
				rep.Loss = &l
			}
			for _, m := range e.Val.Metrics {
				if !math.IsNaN(m.Value) && !math.IsInf(m.Value, 0) {
					rep.Metrics[m.Name] = m.Value
				}
			}
		}
		b, err := json.Marshal(rep)
		if err != nil {
			return
		}
		fmt.Fprintf(out, "%s%s\n", sweepEpochPrefix, b)
		if rep.Last {
			return
		}
		line, err := answers.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "go" {
			cancel()
		}
	}
}
