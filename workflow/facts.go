package workflow

import (
	"fmt"
	"strings"

	"pipe/dataset"
	"pipe/lang"
	"pipe/planner"
	"pipe/spec"
	"pipe/stdlib"
)

// facts are what the planner is told beyond the file and the flags.
type facts struct {
	host planner.HostInfo
	// data are the data's facts as planner options, nil when the
	// purpose does not read the data.
	data []planner.Option
}

// gather collects the facts for a purpose. The sources are counted
// before the host is measured: a raster source loads GDAL's drivers,
// which the process's runtime, measured with the host, then includes
// (planner/process.go).
func (w *Workflow) gather(prog *lang.Program, purpose Purpose) facts {
	var f facts
	if purpose.readsData() {
		f.data = dataOptions(prog)
	}
	f.host = w.hostInfo()
	return f
}

// dataOptions counts the training source's samples without loading them
// (dataset.CountSamples), for the planner: an explicit batch larger than
// the data is an error, an auto batch leaves enough steps an epoch. A
// source that cannot be counted (a missing file) plans without it; the
// run reports the file.
func dataOptions(prog *lang.Program) []planner.Option {
	b := prog.TrainSource()
	if b == nil {
		return nil
	}
	opts := []planner.Option{dataMemoryOption(prog), predictMemoryOption(prog)}
	if p := prog.Block("predict"); p != nil {
		src := b
		if v := p.Field("source").First(); v != nil {
			src = prog.Named("source", v.Str)
		}
		if src != nil && src.Label("kind") == "geotiff" {
			if w, h, err := dataset.RasterSize(sourceSpec(src)); err == nil {
				opts = append(opts, planner.WithPredictRaster(w, h))
			}
		}
	}
	ct, err := dataset.CountSamples(sourceSpec(b), dataset.WithSeed(fileSeedOf(prog)))
	if err != nil || ct.Train <= 0 {
		return opts
	}
	return append(opts, planner.WithTrainSamples(int64(ct.Train), ct.Exact))
}

// dataMemoryOption says what the sources a run opens (train's, and
// evaluate's and predict's where they read others) hold in memory, for
// the process's total (dataset.ResidentBytes). A source that cannot be read
// counts nothing; the run reports it.
func dataMemoryOption(prog *lang.Program) planner.Option {
	var blocks []*lang.Block
	seen := map[*lang.Block]bool{}
	addSrc := func(b *lang.Block) {
		if b != nil && !seen[b] {
			seen[b] = true
			blocks = append(blocks, b)
		}
	}
	addSrc(prog.TrainSource())
	for _, kind := range []string{"evaluate", "predict"} {
		if v := prog.Block(kind).Field("source").First(); v != nil {
			addSrc(prog.Named("source", v.Str))
		}
	}
	return planner.WithDataMemory(func(inElems int64) (int64, string) {
		var total int64
		var what []string
		for _, b := range blocks {
			r, err := dataset.ResidentBytes(sourceSpec(b), inElems)
			if err != nil {
				continue
			}
			total += r.Bytes
			what = append(what, fmt.Sprintf("source %s, %s", b.Name(), r.What))
		}
		return total, strings.Join(what, "; ")
	})
}

// sourceSpec decodes a checked source block for data (stdlib.DecodeSource).
// Its diagnostics can only say that the schema and the spec disagree,
// which the run reports; a count is a fact the plan may go without.
func sourceSpec(b *lang.Block) *spec.Source {
	s, _ := stdlib.DecodeSource(b)
	return s
}

// fileSeedOf is the file's top-level seed, the seed of splits that give
// none (as exec opens them).
func fileSeedOf(prog *lang.Program) int64 {
	if v := prog.Top.Field("seed").First(); v != nil {
		return v.Int
	}
	return 0
}

// predictMemoryOption says what the predict block's prediction holds
// (dataset.PredictBytes): the blended volume of a volume or zarr source.
func predictMemoryOption(prog *lang.Program) planner.Option {
	pb := prog.Block("predict")
	src := prog.TrainSource()
	if v := pb.Field("source").First(); v != nil {
		src = prog.Named("source", v.Str)
	}
	return planner.WithPredictMemory(func(k int64) (int64, string) {
		if pb == nil || src == nil {
			return 0, ""
		}
		r, err := dataset.PredictBytes(sourceSpec(src), k)
		if err != nil {
			return 0, ""
		}
		return r.Bytes, r.What
	})
}
