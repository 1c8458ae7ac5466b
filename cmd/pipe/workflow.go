package main

import (
	"pipe/engine"
	"pipe/run/forecast"
	"pipe/workflow"
)

// The facts' sources and the engines, which tests replace so that no
// output depends on the machine that runs them.
var (
	// hostInfo measures the machine, and asks each engine what it reads
	// of it.
	hostInfo = workflow.DetectHost
	// probeWorker, when set, asks an engine's worker what it has in place of
	// the engine's own probe, which starts its Python once, before any
	// data is read, to say at once what is missing.
	probeWorker func(python string) (engine.Runtime, error)
	// backends, when set, are the engines pipe run offers in place of the
	// registered ones, set up as the flags say.
	backends func(engine.Setup) []engine.Backend
	// forecastCache is the file plans' forecasts are cached in; nil makes
	// plans without forecasts (tests whose output must not depend on this
	// machine's speed).
	forecastCache = forecast.CacheFile
)

// workflow is the orchestration the command plans and runs through, with
// the engines' Python that --python (python, "" when not given) or
// PIPE_PYTHON names.
func (a *app) workflow(python string) *workflow.Workflow {
	opts := []workflow.Option{workflow.WithHost(hostInfo),
		workflow.WithPython(engine.PythonFor(python, a.env.Getenv)), workflow.WithLogger(a.log)}
	if probeWorker != nil {
		opts = append(opts, workflow.WithProbe(probeWorker))
	}
	if backends != nil {
		opts = append(opts, workflow.WithEngines(backends))
	}
	if forecastCache != nil {
		opts = append(opts, workflow.WithForecasts(forecastCache()))
	}
	return workflow.New(opts...)
}
