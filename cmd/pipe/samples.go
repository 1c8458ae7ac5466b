package main

import (
	"fmt"
	"strings"

	"pipe/exec/data"
	"pipe/lang"
	"pipe/planner"
	"pipe/spec"
	"pipe/stdlib"
)

// samplesOption counts the training source's samples without loading
// them (data.CountSamples), for the planner: an explicit batch larger than
// the data is an error, an auto batch leaves enough steps an epoch. A
// source that cannot be counted (a missing file) plans without it; the
// run reports the file.
func samplesOption(prog *lang.Program) []planner.Option {
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
			if w, h, err := data.RasterSize(sourceSpec(src)); err == nil {
				opts = append(opts, planner.WithPredictRaster(w, h))
			}
		}
	}
	ct, err := data.CountSamples(sourceSpec(b), data.WithSeed(fileSeedOf(prog)))
	if err != nil || ct.Train <= 0 {
		return opts
	}
	return append(opts, planner.WithTrainSamples(int64(ct.Train), ct.Exact))
}

// dataMemoryOption says what the sources a run opens (train's, and
// evaluate's and predict's where they read others) hold in memory, for
// the process's total (data.ResidentBytes). A source that cannot be read
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
			r, err := data.ResidentBytes(sourceSpec(b), inElems)
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
// (data.PredictBytes): the blended volume of a volume or zarr source.
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
		r, err := data.PredictBytes(sourceSpec(src), k)
		if err != nil {
			return 0, ""
		}
		return r.Bytes, r.What
	})
}
