package main

import (
	"pipe/exec/data"
	"pipe/lang"
	"pipe/planner"
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
	ct, err := data.CountSamples(b, data.WithSeed(fileSeedOf(prog)))
	if err != nil || ct.Train <= 0 {
		return nil
	}
	return []planner.Option{planner.WithTrainSamples(int64(ct.Train), ct.Exact)}
}

// fileSeedOf is the file's top-level seed, the seed of splits that give
// none (as exec opens them).
func fileSeedOf(prog *lang.Program) int64 {
	if v := prog.Top.Field("seed").First(); v != nil {
		return v.Int
	}
	return 0
}
