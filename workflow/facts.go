package workflow

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"pipe/dataset"
	"pipe/planner"
	"pipe/spec"
)

// facts are what the planner is told beyond the file and the flags.
type facts struct {
	host planner.HostInfo
	// data are the data's facts as planner options, nil when the
	// purpose does not read the data; validation is the samples the
	// training source holds out for validation, which the forecast's
	// epoch counts (0: none, or not counted).
	data       []planner.Option
	validation int64
	// read is what probing the sources the run opens found (nil when
	// the purpose does not read the data).
	read *reads
}

// gather collects the facts for a purpose from the decoded program (nil:
// it did not decode, and the plan goes without the data's facts). The
// sources are counted before the host is measured: a raster source loads
// GDAL's drivers, which the process's runtime, measured with the host,
// then includes (planner/process.go). The language server's come from
// the Workflow's cache (editorFacts), so that no edit waits on the data.
func (w *Workflow) gather(prog *spec.Program, purpose Purpose) facts {
	var f facts
	switch {
	case prog == nil || purpose == ForExport:
	case purpose == ForEditor:
		f.data = w.editorFacts(prog)
	default:
		f.read = probe(prog)
		f.data, f.validation = dataOptions(prog, f.read)
	}
	f.host = w.hostInfo()
	return f
}

// dataOptions counts the training source's samples without loading them
// (and returns those held out for validation)
// (dataset.CountSamples), for the planner: an explicit batch larger than
// the data is an error, an auto batch leaves enough steps an epoch. What
// the sources hold in memory is measured when the planner asks, once for
// each input size. A source the probe could not read (rd, nil for none)
// is not read again: a stalled store's timeouts are paid once, and the
// plan reports the error (reads.diagnostics).
func dataOptions(prog *spec.Program, rd *reads) ([]planner.Option, int64) {
	train := prog.TrainSource()
	if train == nil {
		return nil, 0
	}
	opts := []planner.Option{dataMemoryOption(prog, rd), predictMemoryOption(prog, rd)}
	if src := predictSource(prog); src != nil && src.GeoTIFF != nil && rd.ok(src) {
		if w, h, err := dataset.RasterSize(src); err == nil {
			opts = append(opts, planner.WithPredictRaster(w, h))
		} else {
			rd.missed(src, "its size", err)
		}
	}
	if !rd.ok(train) {
		return opts, 0
	}
	if f, err := dataset.DeviceFormOf(train); err == nil {
		opts = append(opts, planner.WithDeviceData(planner.DeviceData{Bytes: f.Bytes, What: f.What, Not: f.Not}))
	} else {
		rd.missed(train, "its size on a device", err)
	}
	var seed int64 // the file's, the seed of splits that give none
	if prog.Seed != nil {
		seed = *prog.Seed
	}
	ct, err := dataset.CountSamples(train, dataset.WithSeed(seed))
	if err != nil {
		rd.missed(train, "its samples", err)
	}
	if err != nil || ct.Train <= 0 {
		return opts, 0
	}
	return append(opts, planner.WithTrainSamples(int64(ct.Train), ct.Exact)), int64(max(ct.All-ct.Train, 0))
}

// predictSource is the source the predict block reads; nil without one.
func predictSource(prog *spec.Program) *spec.Source {
	switch {
	case prog.Predict == nil:
		return nil
	case prog.Predict.Source != "":
		return prog.Source(prog.Predict.Source)
	}
	return prog.TrainSource()
}

// memo remembers f's answer for each argument; it is safe for
// concurrent use.
func memo(f func(int64) (int64, string)) func(int64) (int64, string) {
	type answer struct {
		n    int64
		what string
	}
	var mu sync.Mutex
	seen := map[int64]answer{}
	return func(k int64) (int64, string) {
		mu.Lock()
		defer mu.Unlock()
		if a, ok := seen[k]; ok {
			return a.n, a.what
		}
		n, what := f(k)
		seen[k] = answer{n, what}
		return n, what
	}
}

// dataMemoryOption says what the sources a run opens (train's, and
// evaluate's and predict's where they read others) hold in memory, for
// the process's total (dataset.ResidentBytes). A source that cannot be
// read counts nothing, and the plan says so (reads).
func dataMemoryOption(prog *spec.Program, rd *reads) planner.Option {
	srcs := runSources(prog)
	return planner.WithDataMemory(memo(func(inElems int64) (int64, string) {
		var total int64
		var what []string
		for _, s := range srcs {
			if !rd.ok(s) {
				continue
			}
			r, err := dataset.ResidentBytes(s, inElems)
			if err != nil {
				rd.missed(s, "its memory", err)
				continue
			}
			total += r.Bytes
			what = append(what, fmt.Sprintf("source %s, %s", s.Name, r.What))
		}
		return total, strings.Join(what, "; ")
	}))
}

// runSources are the sources a run opens: train's, then evaluate's and
// predict's where they read others.
func runSources(prog *spec.Program) []*spec.Source {
	var srcs []*spec.Source
	add := func(s *spec.Source) {
		if s != nil && !slices.Contains(srcs, s) {
			srcs = append(srcs, s)
		}
	}
	add(prog.TrainSource())
	if e := prog.Evaluate; e != nil && e.Source != "" {
		add(prog.Source(e.Source))
	}
	if p := prog.Predict; p != nil && p.Source != "" {
		add(prog.Source(p.Source))
	}
	return srcs
}

// predictMemoryOption says what the predict block's prediction holds
// (dataset.PredictBytes): the blended volume of a volume or zarr source.
func predictMemoryOption(prog *spec.Program, rd *reads) planner.Option {
	src := predictSource(prog)
	return planner.WithPredictMemory(memo(func(k int64) (int64, string) {
		if src == nil || !rd.ok(src) {
			return 0, ""
		}
		r, err := dataset.PredictBytes(src, k)
		if err != nil {
			rd.missed(src, "its prediction's memory", err)
			return 0, ""
		}
		return r.Bytes, r.What
	}))
}
