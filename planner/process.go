package planner

import (
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/spec"
)

// A native run's process
//
// On the CPU the plan's total is the pipe process's peak resident memory
// (VmHWM), what the OS measures and the run reports beside it. Besides the
// engine's step and the loaders' batches it counts the runtime's baseline,
// the libraries at work, the data the sources hold, the checkpoint copy of
// the model's state, and the garbage collector's headroom; a native run
// sets the Go runtime's soft memory limit from that total, so the collector
// runs before the heap passes the plan.
//
// Derivation: docs/design/process-memory.md.

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

// minHeadroom is the least headroom. The soft limit leaves the collector
// it twice (processDecision); at 4 MiB, the Go runtime's least heap goal,
// a long run collected without pause once the runtime's own memory filled
// that room (docs/design/process-memory.md).
const minHeadroom = 6 << 20

// GDALAtWork is what reading rasters adds outside the Go heap while a
// run trains: GDAL's block cache and the C heaps of the threads that
// call it (the loader's workers), which keep their freed memory. A
// calibration: the rise of resident memory beyond the Go heap and the
// calibrated LibrariesAtWork on the three raster examples here (olinda,
// pix2pix_bands, esrgan_landsat), 11 to 14 MiB, with GDAL 3.6.
const GDALAtWork = 12 << 20

// readsRasters says whether the run opens a raster source.
func (pl *planner) readsRasters() bool {
	for _, kind := range []string{"train", "evaluate", "predict"} {
		b := pl.sp.TrainSource()
		if kind != "train" {
			name := ""
			if kind == "evaluate" && pl.sp.Evaluate != nil {
				name = pl.sp.Evaluate.Source
			} else if kind == "predict" && pl.sp.Predict != nil {
				name = pl.sp.Predict.Source
			}
			if name == "" {
				continue
			}
			b = pl.sp.Source(name)
		}
		if b != nil && b.Kind == spec.KindGeoTIFF {
			return true
		}
	}
	return false
}

// GCHeadroomDiv sets the garbage collector's headroom: 1/32 of the heap,
// and at least minHeadroom.
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
	work := int64(LibrariesAtWork)
	if pl.readsRasters() {
		work = add(work, GDALAtWork)
	}
	m.static.runtime = add(rt, work)
	reasons = append(reasons, fmt.Sprintf("runtime %s: the process before any data or model, %s, plus %s for the libraries at work (a calibration)",
		FormatBytes(m.static.runtime), how, FormatBytes(work)))
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
	// biases beside the trained ones (engine/native's convKernel.refold).
	if pl.evaluates() || pl.sp.Predict != nil {
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
	if heap, gdal := pl.predictRaster(); heap > 0 {
		m.static.fixed = add(m.static.fixed, heap)
		m.static.runtime = add(m.static.runtime, gdal)
		reasons = append(reasons, fmt.Sprintf("predict's raster %s: its blended output and weights, and %s outside the Go heap for GDAL's copy as it writes it", FormatBytes(heap), FormatBytes(gdal)))
	}
	if pl.savesCheckpoints() {
		m.static.checkpoint = add(m.static.parameters, m.static.optimizer)
		reasons = append(reasons, fmt.Sprintf("checkpoint copy %s: the state a checkpoint is written from", FormatBytes(m.static.checkpoint)))
	}
	m.gcDiv = GCHeadroomDiv
	reasons = append(reasons, fmt.Sprintf("the Go runtime's soft memory limit is the total less the runtime, leaving the collector 1/%d of the heap for garbage", GCHeadroomDiv))
	pl.processNote = strings.Join(reasons, "; ") + "."
}

// predictRaster is what a geotiff predict holds while it writes, on
// its output grid (the scene's, or as many times finer as the model's
// [K, h', w'] output is larger than its [C, h, w] input), float32: in
// the Go heap the blender's sums, which become the result (K bands), and
// its weights (one); outside it GDAL's block cache's copy of the result
// as it is written (K bands). 0 without a geotiff predict of known size.
func (pl *planner) predictRaster() (heap, gdal int64) {
	w, h := pl.cfg.predictW, pl.cfg.predictH
	g := pl.graph
	if w <= 0 || h <= 0 || pl.sp.Predict == nil || g == nil {
		return 0, 0
	}
	in, out := g.Input, g.OutShape()
	if len(in) != 3 || len(out) != 3 || in[1] <= 0 || in[2] <= 0 {
		return 0, 0
	}
	fy, fx := max(out[1]/in[1], 1), max(out[2]/in[2], 1)
	plane := mul(mul(4, mul(w, fx)), mul(h, fy))
	return mul(add(out[0], 1), plane), mul(out[0], plane)
}

// savesCheckpoints says whether a run writes checkpoint files (train's
// save field is not none).
func (pl *planner) savesCheckpoints() bool {
	if pl.train.Save == "none" {
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
	if pl.traits().InProcess && pl.cfg.data != nil {
		// The heap's share of the total, and the headroom once more: the
		// Go runtime's own structures (stacks, heap metadata) count
		// against the limit too, and a limit at the live heap would turn
		// into constant collection.
		mem.GCLimit = mem.Total - mem.Runtime + mem.Headroom
	}
	pl.decide("process", FormatBytes(mem.Total), "The process's peak resident memory, which the run measures: "+pl.processNote)
}

// workerTerms adds to a plan on the CPU what the engine's worker holds
// beyond its step (cost.Processor): its runtime and the state it writes
// each checkpoint into; and its input slots, each holding a batch.
func (pl *planner) workerTerms() {
	m := pl.cost
	if n := pl.traits().InputSlots; n > 0 {
		m.input = mul(m.input, int64(n))
		m.unitInput = m.input
	}
	pr, ok := pl.eng.(cost.Processor)
	if !ok {
		return
	}
	w := pr.Process(cost.ProcessSetup{Graph: pl.graph, Host: pl.engineHost(), Params: m.params, Optimizer: m.static.optimizer,
		Checkpoints: pl.savesCheckpoints()})
	m.static.runtime, m.static.checkpoint = w.Runtime, w.Checkpoint
	pl.processNote = w.Note
}

// engineHost is what the plan's engine knows of the host.
func (pl *planner) engineHost() cost.Host {
	if pl.eng == nil {
		return cost.Host{}
	}
	return pl.host.Engines[pl.eng.Name()]
}

// costSetup is what the plan's engine prices its step by: the device,
// the precision and the loss, gs for a GPU's terms (nil: none priced),
// its threads and the host's facts.
func (pl *planner) costSetup(prec plan.Precision, loss string, gs *cost.GPUSetup) cost.Setup {
	return cost.Setup{Device: pl.dev.Kind, Precision: prec, Loss: loss, GPU: gs, HostCPU: pl.host.CPU,
		Host: pl.engineHost(), Threads: pl.dev.Cores}
}
