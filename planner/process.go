package planner

import (
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
)

// A native run's process
//
// On the CPU the plan's total is the pipe process's peak resident memory,
// which is what the OS measures (VmHWM, getrusage's ru_maxrss) and what
// the run reports beside it. Besides the executor's step (memory_cpu.go)
// and the loaders' batches (loader.go), the process holds:
//
//   - its runtime: the code and libraries it has mapped and touched and
//     the Go runtime's own memory, before any data or model. DetectHost
//     measures it as the planning process's resident memory (VmRSS),
//     which for pipe plan and pipe run is the same binary at the same
//     point; where it was not measured (a plan for a named device or
//     golden tests' hosts) RuntimeBaseline stands in;
//   - the libraries at work: what OpenBLAS's and GDAL's buffers and the
//     code paths of a training step add once the step runs
//     (LibrariesAtWork, a calibration);
//   - the data: every source the run opens, as it holds its samples
//     (data.ResidentBytes, given with WithDataMemory);
//   - the checkpoint copy: the model's state (parameters, batchnorm
//     statistics, optimizer state) is copied before a checkpoint file is
//     written from it, when the run writes checkpoints;
//   - the collector's headroom: the Go heap grows with garbage between
//     collections (by default up to twice what is live). A native run
//     sets the runtime's soft memory limit (runtime/debug.SetMemoryLimit)
//     to the plan's total less the runtime's baseline (plus the headroom
//     once more, for the runtime's own structures), so the collector
//     runs before the heap passes the plan; the plan leaves it
//     1/GCHeadroomDiv of the heap for garbage. Where the data was not
//     counted (no WithDataMemory) no limit is set.

// RuntimeBaseline is the pipe process's resident memory before any data
// or model where it was not measured: a calibration, pipe's binary with
// its libraries (GDAL, OpenBLAS) measured at start-up at 50 to 60 MiB on
// Debian 12 (VmRSS), rounded up.
const RuntimeBaseline = 60 << 20

// LibrariesAtWork is what the process's code and libraries add to its
// resident memory once a training step runs (OpenBLAS's packing buffers
// and thread pool, the training code's pages): a calibration, measured
// as the rise of resident memory over the Go heap on the examples here.
const LibrariesAtWork = 4 << 20

// minGCLimit is the least soft memory limit a run sets.
const minGCLimit = 64 << 20

// GCHeadroomDiv sets the garbage collector's headroom: 1/32 of the heap.
const GCHeadroomDiv = 32

// processRuntime is this process's resident memory now (VmRSS) less
// what the Go heap holds of it (its objects, and its free spans not yet
// given back to the OS): the code, the libraries and the runtime's own
// structures, which stay; the heap's bytes are reused for the data and
// the model, which the plan counts on their own. 0 where /proc does not
// say.
func processRuntime() int64 {
	rss := processRSS()
	if rss == 0 {
		return 0
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	var heap int64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			heap += int64(v.Value.Uint64())
		}
	}
	return max(rss-heap, 0)
}

// processRSS is this process's resident memory now (VmRSS), 0 where
// /proc does not say.
func processRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// processTerms adds the rest of a native run's process to the cost model
// and says where each term comes from.
func (pl *planner) processTerms() {
	m, g := pl.cost, pl.graph
	var reasons []string
	rt, how := pl.host.RSS, "measured at start-up (VmRSS)"
	if rt <= 0 || pl.dev.Origin != "local" {
		rt, how = RuntimeBaseline, "the calibrated baseline of pipe's binary with its libraries"
	}
	m.static.runtime = add(rt, LibrariesAtWork)
	reasons = append(reasons, fmt.Sprintf("runtime %s: the process before any data or model, %s, plus %s for the libraries at work (a calibration)",
		FormatBytes(m.static.runtime), how, FormatBytes(LibrariesAtWork)))
	if pl.cfg.data != nil {
		var in int64
		for _, nd := range g.Nodes {
			if nd.Op == "input" {
				in = add(in, numel(nd.Out))
			}
		}
		b, what := pl.cfg.data(in)
		m.static.data = b
		if what != "" {
			reasons = append(reasons, fmt.Sprintf("data %s: %s", FormatBytes(b), what))
		}
	} else {
		reasons = append(reasons, "data not counted: the sources were not read")
	}
	reasons = pl.predictTerm(reasons)
	// Evaluation folds each batchnorm into the conv before it (the
	// plan's inference folds): the executor keeps the folded weights and
	// biases beside the trained ones (exec/cpu's convKernel.refold).
	if pl.evaluates() || pl.prog.Block("predict") != nil {
		var folds int64
		for _, f := range pl.plan.Fusion.InferenceFolds {
			for _, nd := range g.Nodes {
				if nd.Name == f[0] && len(nd.Out) > 0 {
					folds = add(folds, mul(add(nd.Params, nd.Out[0]), 4))
				}
			}
		}
		if folds > 0 {
			m.folds = folds
			m.cpu.fixedEval = add(m.cpu.fixedEval, folds)
			m.static.fixed = add(m.static.fixed, folds)
			reasons = append(reasons, fmt.Sprintf("evaluation's folded conv weights %s, counted in evaluation", FormatBytes(folds)))
		}
	}
	if pl.savesCheckpoints() {
		m.static.checkpoint = add(m.static.parameters, m.static.optimizer)
		reasons = append(reasons, fmt.Sprintf("checkpoint copy %s: the state a checkpoint is written from", FormatBytes(m.static.checkpoint)))
	}
	m.gcDiv = GCHeadroomDiv
	reasons = append(reasons, fmt.Sprintf("the Go runtime's soft memory limit is the total less the runtime, leaving the collector 1/%d of the heap for garbage", GCHeadroomDiv))
	pl.processNote = strings.Join(reasons, "; ") + "."
}

// savesCheckpoints says whether a run writes checkpoint files (train's
// save field is not none).
func (pl *planner) savesCheckpoints() bool {
	if v := pl.train.Field("save").First(); v != nil && !v.Auto && v.Str == "none" {
		return false
	}
	return true
}

// processDecision records the process's terms once the batch is chosen.
func (pl *planner) processDecision() {
	if pl.processNote == "" {
		return
	}
	mem := &pl.plan.Memory
	if pl.cfg.data != nil {
		// The heap's share of the total, and the headroom once more: the
		// Go runtime's own structures (stacks, heap metadata) count
		// against the limit too, and a limit at the live heap would turn
		// into constant collection. Never under minGCLimit.
		mem.GCLimit = max(mem.Total-mem.Runtime+mem.Headroom, minGCLimit)
	}
	pl.decide("process", FormatBytes(mem.Total), "The process's peak resident memory, which the run measures: "+pl.processNote)
}
