package planner

import (
	"fmt"
	"slices"
	"strings"

	"pipe/diag"
	"pipe/planner/cost"
	"pipe/planner/plan"
)

// The engine. Each engine describes itself (cost.Engine: its name, its
// traits and its cost model; cost.Explainer: its own words) and the
// callers hand the registered ones in (WithCosts). engine auto takes the
// engine whose traits claim the device's kind; everything after reads
// the chosen engine's traits, never its name (docs/design/engines.md).
// The planner decides without Python: whether the worker's torch has
// torch.compile is known only when it starts, so the plan says "compile
// where the torch has it", and the run report says what ran.

// traits is what the plan's engine says of itself; the planner reads
// these, never the engine's name.
func (pl *planner) traits() cost.Traits { return pl.eng.Traits() }

// enginesWith names the engines given to the planner that have a trait:
// "native", "native or torch".
func (pl *planner) enginesWith(has func(cost.Traits) bool) string {
	var names []string
	for _, e := range pl.cfg.costs {
		if e != nil && has(e.Traits()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return joinNames(names, "or")
}

// joinNames writes names as a list: "a", "a and b", "a, b and c".
func joinNames(names []string, and string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + and + " " + names[len(names)-1]
}

// pickEngine resolves the engine field (or --engine) against the device
// and the engines given (WithCosts): auto takes the engine whose traits
// claim the device's kind.
func (pl *planner) pickEngine() bool {
	req, at := "auto", (*diag.Range)(nil)
	at = pl.sp.At.Written("engine")
	if v, ok := pl.sp.Engine.Fixed(); ok {
		req = v
	}
	if pl.cfg.engine != "" {
		req, at = pl.cfg.engine, nil
	}
	kind := pl.dev.Kind
	var eng cost.Engine
	var names []string
	for _, e := range pl.cfg.costs {
		if e == nil {
			continue
		}
		names = append(names, e.Name())
		if (req == "auto" && slices.Contains(e.Traits().Auto, kind)) || e.Name() == req {
			eng = eng0(eng, e)
		}
	}
	slices.Sort(names)
	if eng == nil {
		switch {
		case len(names) == 0:
			pl.errorf(nil, "no-cost-model", "no engine to plan for",
				"The planner reads each engine's descriptor and cost model, and none was given: the caller passes them with planner.WithCosts.")
		case req == "auto":
			pl.errorf(at, "unknown-engine", "no engine for engine auto on "+pl.dev.Name,
				"None of the engines (%s) is auto's choice on %s; write one of them.", joinNames(names, "and"), pl.dev.Name)
		default:
			pl.errorf(at, "unknown-engine", fmt.Sprintf("unknown engine %q", req), "The engines are %s.", joinNames(append([]string{"auto"}, names...), "and"))
		}
		return false
	}
	ex, _ := eng.(cost.Explainer)
	if !eng.Traits().Runs(kind) {
		summary, detail := fmt.Sprintf("the %s engine does not run on %s", eng.Name(), pl.dev.Name),
			fmt.Sprintf("Plan for another device with --device, or write engine auto (engines: %s).", joinNames(names, "and"))
		if ex != nil {
			summary, detail = ex.Refused(pl.dev)
		}
		pl.errorf(at, "engine-device", summary, "%s", detail)
		return false
	}
	blas := ""
	if pl.dev.Origin == "local" {
		blas = pl.host.Engines[eng.Name()].Kernels // pl.eng is not yet eng
	}
	why := fmt.Sprintf("%s as written.", eng.Name())
	if req == "auto" {
		why = fmt.Sprintf("engine auto on %s: %s.", pl.dev.Name, eng.Name())
	}
	if ex != nil {
		why = ex.Chosen(pl.dev, req == "auto", blas)
	}
	pl.eng = eng
	pl.plan.Engine = plan.Engine{Name: eng.Name(), Requested: req}
	pl.decide("engine", eng.Name(), why)
	return pl.pickDistributed()
}

// eng0 keeps the first engine found.
func eng0(had, e cost.Engine) cost.Engine {
	if had != nil {
		return had
	}
	return e
}

// pickDistributed sets the data-parallel layout from WithDevices.
func (pl *planner) pickDistributed() bool {
	nproc, nnodes := max(pl.cfg.nproc, 1), max(pl.cfg.nnodes, 1)
	d := plan.Distributed{NProcPerNode: nproc, NNodes: nnodes, WorldSize: nproc * nnodes}
	if d.WorldSize > 1 {
		if !pl.traits().DataParallel {
			dp := pl.enginesWith(func(t cost.Traits) bool { return t.DataParallel })
			pl.errorf(nil, "engine-distributed", "data parallelism needs the "+dp+" engine",
				"--nproc-per-node %d --nnodes %d trains on %d devices with DistributedDataParallel, which the %s engine runs; give --engine %s (or engine %s in the file).", nproc, nnodes, d.WorldSize, dp, dp, dp)
			return false
		}
		d.Backend = "gloo"
		if pl.dev.Kind == plan.BackendGPU {
			d.Backend = "nccl"
		}
	}
	pl.plan.Distributed = d
	return true
}

// engineDecisions hands the plan to its engine's decisions (a
// cost.Decider), once the precision, the batch, the checkpoint segments
// and the step time are known: the engine's settings are its own.
func (pl *planner) engineDecisions() {
	dec, ok := pl.eng.(cost.Decider)
	if !ok {
		return
	}
	s := &cost.Settings{Plan: pl.plan, Graph: pl.graph, SyncBatchnorm: "auto",
		Memory: cost.Memory{Attention: pl.cost.attention, AttentionWhy: pl.cost.attentionWhy, ConvPath: pl.cost.convPath, ConvPathWhy: pl.cost.convPathWhy,
			Version: pl.cost.version, VersionAssumed: pl.cost.versionAssumed},
		Decide: pl.decide, GraphOff: pl.engineHost().GraphsOff,
		Warn: func(at *diag.Range, code, summary, detail string) {
			pl.warnf(at, code, summary, "%s", detail)
		}}
	s.At = pl.train.At.Written("sync_batchnorm")
	if v, ok := pl.train.SyncBatchnorm.Fixed(); ok {
		s.SyncBatchnorm = fmt.Sprint(v)
	}
	if d := &pl.plan.Distributed; d.WorldSize > 1 {
		s.AllReduce, s.AllReduceWhy = allReduceValue(d), allReduceWhy(pl.allReduce(), d)
	}
	dec.Decide(s)
}

// allReduceValue is the all-reduce decision's value: the bytes a step.
func allReduceValue(d *plan.Distributed) string {
	switch {
	case d.NNodes > 1 && d.AllReduceBytes > 0:
		return fmt.Sprintf("%s a device, %s a node", FormatBytes(d.AllReduceBytes), FormatBytes(d.NetworkBytes))
	case d.NNodes > 1 || d.AllReduceBytes == 0:
		return FormatBytes(d.NetworkBytes) + " a node"
	}
	return FormatBytes(d.AllReduceBytes) + " a device"
}

// allReduceWhy says how the gradients are all-reduced, and over what.
func allReduceWhy(a allReduce, d *plan.Distributed) string {
	tail := fmt.Sprintf(" per optimizer step, in buckets of %s overlapped with the backward pass; accumulating micro-batches skip it (no_sync).", FormatBytes(a.bucket))
	if a.linkBW == 0 {
		return fmt.Sprintf("a ring all-reduce of the %s of fp32 gradients over gloo's sockets: each rank sends and receives 2(W−1)/W of them", FormatBytes(a.grads)) + tail
	}
	why := fmt.Sprintf("the %s of fp32 gradients, reduce-scattered and all-gathered among a node's %d GPUs over %s (2(G−1)/G of them a device)", FormatBytes(a.grads), d.NProcPerNode, a.linkName)
	if d.NNodes > 1 {
		why += fmt.Sprintf(", and each node's share all-reduced between the %d nodes over the network (2(N−1)/N of them a node, as NCCL's trees and rings across nodes send)", d.NNodes)
	}
	return why + tail
}
