package main

import (
	"pipe/engine"
	"pipe/engine/native"
	"pipe/engine/torch"
	"pipe/planner"
	"pipe/run/forecast"
	"pipe/workflow"
)

// The facts' sources and the engines, which tests replace so that no
// output depends on the machine that runs them.
var (
	// hostInfo measures the machine.
	hostInfo = func() planner.HostInfo {
		h := planner.DetectHost()
		h.Int8 = native.Int8Kernel()
		h.BLAS = native.BLASKernels()
		h.TorchAllocator, _ = torch.CPUAllocator()
		h.TorchOneDNNOff = torch.OneDNNOff()
		h.TorchOneDNNMaxISA = torch.OneDNNMaxISA()
		return h
	}
	// probeTorch starts the torch engine's Python once, before any data
	// is read, to say at once what is missing.
	probeTorch = torch.Probe
	// backends, when set, are the engines pipe run offers in place of the
	// native and torch engines, the torch one set up as the flags say.
	backends func(t torch.Backend) []engine.Backend
	// forecastCache is the file plans' forecasts are cached in; nil makes
	// plans without forecasts (tests whose output must not depend on this
	// machine's speed).
	forecastCache = forecast.CacheFile
)

// workflow is the orchestration the command plans and runs through, with
// the torch engine's Python that --python (python, "" when not given) or
// PIPE_PYTHON names.
func (a *app) workflow(python string) *workflow.Workflow {
	opts := []workflow.Option{workflow.WithHost(hostInfo), workflow.WithTorchProbe(probeTorch),
		workflow.WithPython(torch.PythonFor(python, a.env.Getenv)), workflow.WithLogger(a.log)}
	if backends != nil {
		opts = append(opts, workflow.WithEngines(backends))
	}
	if forecastCache != nil {
		opts = append(opts, workflow.WithForecasts(forecastCache()))
	}
	return workflow.New(opts...)
}
