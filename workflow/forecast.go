package workflow

import (
	"strings"

	"pipe/engine"
	"pipe/engine/costs"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run/forecast"
)

// WithForecasts makes plans asked for with Request.Forecast carry their
// forecast (plan.Forecast), cached in the file cache names ("" keeps
// none). Without it no plan has one, so that nothing a test plans
// depends on this machine's speed.
func WithForecasts(cache string) Option {
	return func(w *Workflow) { w.forecasts, w.forecastCache = true, cache }
}

// forecast fills pl's forecast: the plan's steps timed on an engine that
// computes in this process (Traits.InProcess), else the cache or the
// reason there is none (forecast.For). Only a plan that fits is timed.
func (w *Workflow) forecast(pl *Planned, req Request, validation int64) {
	p := pl.Plan
	if !w.forecasts || !req.Forecast || p == nil || pl.Program == nil {
		return
	}
	if !p.Fits {
		p.Forecast = &plan.Forecast{Missing: "the plan does not fit its device"}
		return
	}
	g, ds := pl.Program.Graph(p.Model)
	if ds.HasErrors() {
		return
	}
	var b engine.Backend
	if traits(p.EngineName()).InProcess {
		for _, e := range w.engines(engine.Setup{Python: w.python, Log: w.log}) {
			if e.Name() == p.EngineName() {
				b = e
			}
		}
	}
	o := w.forecastOptions(req, validation)
	f := forecast.For(b, g, p, pl.Program, o)
	p.Forecast, pl.forecastOpts = &f, &o
}

// forecastOptions are the facts a forecast is keyed and counted by: the
// threads, the kernels and torch of this host, and the validation
// samples gather counted.
func (w *Workflow) forecastOptions(req Request, validation int64) forecast.Options {
	return forecast.Options{Threads: req.Threads, Facts: engineFacts(w.hostInfo()), Cache: w.forecastCache,
		ValidationSamples: validation}
}

// engineFacts is what of each engine on this host decides its speed: the
// kernels an engine in this process runs on, and a worker's library
// ("OpenBLAS (Haswell); torch "), by engine name.
func engineFacts(h planner.HostInfo) string {
	var out []string
	for _, e := range costs.Engines() {
		eh := h.Engines[e.Name()]
		if e.Traits().InProcess {
			out = append(out, eh.Kernels)
		} else {
			out = append(out, e.Name()+" "+eh.Version)
		}
	}
	return strings.Join(out, "; ")
}

// RecordStep keeps a run's measured step time for its plan, for the next
// forecast of an engine that is not timed before a run (forecast.Record);
// a plan made without a forecast keeps nothing.
func (pl *Planned) RecordStep(stepSeconds float64, steps int64) {
	if pl != nil && pl.forecastOpts != nil {
		forecast.Record(pl.Plan, *pl.forecastOpts, stepSeconds, steps)
	}
}
