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
	if f := pl.prog.Top.Field("engine"); f != nil {
		at = rangeOf(f)
		if v := f.First(); v != nil && !v.Auto {
			req = v.Str
		}
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
		blas = pl.host.BLAS
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

// engineDecisions fills the torch engine's settings, each with its
// reason, once the precision, the batch and the checkpoint segments are
// known.
func (pl *planner) engineDecisions() {
	p := pl.plan
	if p.Engine.Name != plan.EngineTorch {
		return
	}
	e := &p.Engine
	gpu := pl.dev.Kind == plan.BackendGPU
	prec := p.Precision
	switch prec.Compute {
	case "bf16", "fp16":
		e.Autocast = prec.Compute
		e.GradScaler = prec.Compute == "fp16"
		why := "torch.autocast in bf16: matrix products and convolutions run in bf16, the ops autocast keeps in fp32 (losses, softmax, norms' statistics) in fp32, with fp32 master weights and no loss scaling."
		if e.GradScaler {
			why = "torch.autocast in fp16 with a GradScaler: dynamic loss scaling keeps small gradients from underflowing fp16's range."
		}
		pl.decide("autocast", prec.Compute, why)
	case "tf32":
		e.TF32 = true
		pl.decide("tf32", "on", "precision tf32: torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 are set, so fp32 matrix products and convolutions use tensor cores.")
	default:
		if gpu {
			pl.decide("tf32", "off", "precision fp32: TF32 is turned off (matmul and cuDNN flags), so every product is full fp32.")
		}
	}
	if a := pl.cost.attention; a != "" {
		what := map[bool]string{true: " keeps the heads×tokens² attention probabilities for the backward pass", false: " keeps each row's softmax statistics, no heads×tokens² matrix, for the backward pass"}[a == "math"]
		pl.decide("attention", a, "nn.MultiheadAttention's training forward runs the "+a+" path ("+pl.cost.attentionWhy+"), which"+what+"; the memory above is priced so.")
	}
	if c := pl.cost.convPath; c != "" {
		pl.decide("conv path", c, "on this host "+pl.cost.convPathWhy+"; the memory above is priced so.")
	}
	conv := hasConv(pl.graph)
	segs := len(p.Checkpoint.Segments)
	if segs > 0 {
		pl.decide("recompute", fmt.Sprintf("%d segments", segs),
			"torch.utils.checkpoint (non-reentrant) runs exactly the plan's checkpoint segments; a recomputed batchnorm normalises with the batch's statistics without updating its running statistics twice.")
	}
	if !gpu {
		e.LossReadback = "sync"
		pl.decide("torch settings", "eager, sync", "on the CPU: eager mode (torch.compile is used on CUDA only), the optimizer PyTorch's own, each micro-batch's loss read back at once.")
		pl.distributedDecision()
		return
	}
	e.Compile = true
	pl.decide("compile", "where available",
		"torch.compile on CUDA when the worker's torch has it (2.x), else eager; the fusion groups above are what it is given to fuse. The run report says which ran.")
	if conv && hasVolume(pl.graph) {
		pl.decide("channels_last", "off", "the model has 3-D convolutions, whose 5-D tensors channels_last (a 4-D format) cannot hold.")
	} else if conv {
		e.ChannelsLast = true
		pl.decide("channels_last", "on", "the model has convolutions: NHWC tensors let cuDNN use its tensor-core kernels without transposes.")
		e.CudnnBenchmark = true
		pl.decide("cudnn.benchmark", "on", fmt.Sprintf("every training batch has the fixed shape %d×%s (the last of an epoch excepted), so cuDNN times its algorithms once per shape and keeps the fastest.",
			p.BatchSize, shapeString(pl.graph.Input)))
		e.CudnnWorkspaceLimit = CudnnWorkspaceLimit
		pl.decide("cudnn workspace", "at most "+FormatBytes(CudnnWorkspaceLimit),
			fmt.Sprintf("CUDNN_CONV_WSCAP_DBG=%d (MiB) caps what one convolution's algorithm, and cudnn.benchmark's trials, may take, so the memory plan can count it; an algorithm that needs more is not tried.", CudnnWorkspaceLimit>>20))
	}
	if k := p.Optimizer.Kind; fusedOptimizer(k) {
		e.FusedOptimizer = true
		why := fmt.Sprintf("fused %s: one kernel updates every parameter, where the foreach version launches several and keeps temporaries (used where the worker's torch has it: Adam and AdamW from 2.0, SGD from 2.3).", k)
		if e.GradScaler {
			why += " Under loss scaling it also takes the GradScaler's found_inf on the device, where a non-fused step reads it back, a host sync every step."
		}
		pl.decide("fused optimizer", "on", why)
	}
	e.PinnedMemory = true
	pl.decide("host to device", "pinned, non-blocking", "the shared memory pipe writes each batch into is registered as page-locked, so the batch goes to the device from there on a copy stream (one host copy) while the step before runs; where CUDA refuses the registration, through a pinned buffer.")
	e.LossReadback = "lagged"
	pl.decide("loss readback", "lagged", "the losses of each optimizer step are read back with the next step's reply, so the host never waits for the GPU between steps; a non-finite loss is caught one step late, before any checkpoint is written.")
	pl.distributedDecision()
}

// distributedDecision explains the data-parallel layout and its traffic.
func (pl *planner) distributedDecision() {
	p := pl.plan
	d := &p.Distributed
	sync := pl.syncBatchnorm()
	if d.WorldSize <= 1 {
		if sync != nil {
			pl.decide("sync_batchnorm", sync.value, sync.why)
		}
		return
	}
	a := pl.allReduce()
	bn := "batchnorm keeps per-device statistics (DDP's default) and rank 0's running statistics are the ones saved"
	if d.SyncBatchnorm {
		bn = "batchnorm's statistics are the whole step's, over every device (sync_batchnorm)"
	}
	pl.decide("data parallel", fmt.Sprintf("%d devices", d.WorldSize),
		fmt.Sprintf("%d per node × %d nodes, DistributedDataParallel over %s: the batch of %d is per device, each optimizer step averages the gradients of %d samples; %s.",
			d.NProcPerNode, d.NNodes, d.Backend, p.BatchSize, p.EffectiveBatch, bn))
	if sync != nil {
		pl.decide("sync_batchnorm", sync.value, sync.why)
	}
	pl.decide("all-reduce", allReduceValue(d), allReduceWhy(a, d))
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

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "×")
}

// SyncBatchnormBelow is the batch a device below which sync_batchnorm auto
// computes batchnorm's statistics over every device's samples. Wu and He
// (Group Normalization, ECCV 2018) measured batchnorm's ImageNet error
// rising as the batch it normalises over falls below 32 a GPU, 10.6
// points above group norm's at 2; at 32 it was at its best.
const SyncBatchnormBelow = 32

type choice struct{ value, why string }

// syncBatchnorm decides Distributed.SyncBatchnorm from train's
// sync_batchnorm (auto: on below SyncBatchnormBelow a device), for a
// model with batchnorm on several devices; nil when there is nothing to
// decide.
func (pl *planner) syncBatchnorm() *choice {
	p := pl.plan
	d := &p.Distributed
	req, at := "auto", (*diag.Range)(nil)
	if f := pl.train.Field("sync_batchnorm"); f != nil {
		at = rangeOf(f)
		if v := f.First(); v != nil && !v.Auto {
			req = fmt.Sprint(v.Bool)
		}
	}
	layers := 0
	for _, n := range pl.graph.Nodes {
		if n.Op == "batchnorm" {
			layers++
		}
	}
	switch {
	case layers == 0:
		if req == "true" {
			pl.warnf(at, "sync-batchnorm-unused", "sync_batchnorm true: the model has no batchnorm",
				"%s has no batchnorm layer, so there are no statistics to share; leave sync_batchnorm out.", p.Model)
		}
		return nil
	case d.WorldSize <= 1:
		if req == "true" {
			return &choice{"off", "sync_batchnorm true, but the plan is for one device, whose statistics are already the whole batch's; it applies with --nproc-per-node or --nnodes."}
		}
		return nil
	}
	all := p.BatchSize * int64(d.WorldSize)
	cost := fmt.Sprintf("each of the model's %d batchnorm layers all-reduces its per-channel sums, sums of squares and count in the forward pass and their gradients in the backward, over %s", layers, d.Backend)
	switch {
	case req == "true":
		d.SyncBatchnorm = true
		return &choice{"on", fmt.Sprintf("sync_batchnorm as written: batchnorm's statistics over the %d devices' %d samples, not each device's %d; %s.", d.WorldSize, all, p.BatchSize, cost)}
	case req == "false":
		return &choice{"off", fmt.Sprintf("sync_batchnorm as written: each device's batchnorm normalises over its own %d samples (DDP's default).", p.BatchSize)}
	case p.BatchSize < SyncBatchnormBelow:
		d.SyncBatchnorm = true
		return &choice{"on", fmt.Sprintf("sync_batchnorm auto: the batch a device is %d, below %d, so each device's batchnorm statistics would come from %d samples; they come from the %d devices' %d instead (Wu and He, Group Normalization, 2018: batchnorm's error rises as its batch falls below 32, 10.6 points above group norm's at 2 on ImageNet); %s.",
			p.BatchSize, SyncBatchnormBelow, p.BatchSize, d.WorldSize, all, cost)}
	default:
		return &choice{"off", fmt.Sprintf("sync_batchnorm auto: the batch a device is %d, at least %d, enough samples for batchnorm's statistics on each device (Wu and He, Group Normalization, 2018), so no all-reduce is added to every batchnorm layer.",
			p.BatchSize, SyncBatchnormBelow)}
	}
}
