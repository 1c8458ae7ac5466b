package workflow

import (
	"fmt"
	"sync"

	"pipe/dataset"
	"pipe/diag"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/spec"
	"pipe/stdlib"
)

// reads are what planning learnt by reading the sources a run opens:
// each one's sample shape from its headers (dataset.SampleShape), or the
// error the run would stop with on opening it, and the facts the plan
// then left out. pipe plan and pipe run turn them into the run's own
// diagnostics (diagnostics), so that the plan refuses what the run
// would, before any compute, and a source that failed is not read again
// while planning (a stalled store costs its timeouts once).
type reads struct {
	srcs   []*spec.Source
	shapes map[*spec.Source][]int64
	errs   map[*spec.Source]error

	mu     sync.Mutex
	misses []miss
}

// miss is a fact the plan left out of a source that the probe read.
type miss struct {
	src  *spec.Source
	what string
	err  error
}

// probe reads the headers of the sources a run opens, in the order the
// run opens them. Paths resolve as the run's do (against the working
// directory).
func probe(prog *spec.Program) *reads {
	rd := &reads{srcs: runSources(prog), shapes: map[*spec.Source][]int64{}, errs: map[*spec.Source]error{}}
	for _, s := range rd.srcs {
		shape, err := dataset.SampleShape(s)
		if err != nil {
			rd.errs[s] = err
			continue
		}
		rd.shapes[s] = shape
	}
	return rd
}

// ok says the probe read s (or nothing was probed).
func (rd *reads) ok(s *spec.Source) bool { return rd == nil || rd.errs[s] == nil }

// missed records that reading what of s failed after the probe read it;
// the first failure of each is kept.
func (rd *reads) missed(s *spec.Source, what string, err error) {
	if rd == nil {
		return
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for _, m := range rd.misses {
		if m.src == s && m.what == what {
			return
		}
	}
	rd.misses = append(rd.misses, miss{s, what, err})
}

// diagnostics are the run's errors for the sources that cannot be read
// and for samples that do not fit the planned model's input (the
// training source's, evaluate's, and predict's where the run compares
// them), then a warning for each fact the plan left out. dec and p may be
// nil (no input check). With elsewhere (Request.DataElsewhere) a source
// that cannot be read here is a warning.
func (rd *reads) diagnostics(dec *stdlib.Program, p *plan.Plan, elsewhere bool) diag.Diagnostics {
	if rd == nil {
		return nil
	}
	var ds diag.Diagnostics
	for _, s := range rd.srcs {
		err := rd.errs[s]
		switch {
		case err == nil:
		case elsewhere:
			d := run.SourceDiagnostic(s, err)
			d.Severity = diag.Warning
			d.Detail += " The job reads its data where it runs, so this machine's copy is not needed; the plan leaves its facts out (its memory, its sample count), and the job's run checks the source when it starts."
			ds = append(ds, d)
		default:
			ds = append(ds, run.SourceDiagnostic(s, err))
		}
	}
	ds = append(ds, rd.inputDiagnostics(dec, p)...)
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for _, m := range rd.misses {
		ds = append(ds, &diag.Diagnostic{Severity: diag.Warning, Code: run.CodeData,
			Summary: fmt.Sprintf("the plan leaves out source %s", m.src.Name),
			Detail:  fmt.Sprintf("Reading %s failed: %v. The run reads the source whole and reports what it finds.", m.what, m.err),
			Subject: m.src.At.Label()})
	}
	return ds
}

// inputDiagnostics compares the probed sample shapes with the input of
// the model p trains (run.InputDiagnostic), where the run does: every
// source but a predict-only raster or volume, which predict cuts into
// windows of the model's input.
func (rd *reads) inputDiagnostics(dec *stdlib.Program, p *plan.Plan) diag.Diagnostics {
	if dec == nil || p == nil {
		return nil
	}
	m := dec.Spec.Model(p.Model)
	g, _ := dec.Graph(p.Model)
	if m == nil || g == nil {
		return nil
	}
	var ds diag.Diagnostics
	for i, s := range rd.srcs {
		shape := rd.shapes[s]
		if shape == nil || i > 0 && !rd.checked(dec.Spec, s) {
			continue
		}
		if opts := run.ModelOptions(s, g.Input); opts != nil {
			if sh, err := dataset.SampleShape(s, opts...); err == nil && sh != nil {
				shape = sh
			}
		}
		if d := run.InputDiagnostic(s, shape, m, g.Input); d != nil {
			ds = append(ds, d)
		}
	}
	return ds
}

// checked says the run compares source s, which train does not read,
// with the model's input: evaluate's source always, predict's unless it
// is a raster, volume or zarr (run_predict.go).
func (rd *reads) checked(prog *spec.Program, s *spec.Source) bool {
	if e := prog.Evaluate; e != nil && e.Source == s.Name {
		return true
	}
	switch s.Kind {
	case spec.KindGeoTIFF, spec.KindVolume, spec.KindZarr:
		return false
	}
	return true
}
