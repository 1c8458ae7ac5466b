package torch

import (
	"fmt"
	"strings"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// The torch engine's settings, which the planner asks for through
// cost.Decider once a plan's batch is chosen: autocast, TF32, compile,
// channels_last, cuDNN's benchmark and workspace cap, the fused
// optimizer, pinned copies, the loss readback and sync_batchnorm, each a
// plan.Decision with its reason.

var _ cost.Decider = Cost{}

// CudnnWorkspaceLimit caps the workspace cuDNN may take for one
// convolution; the engine passes it as CUDNN_CONV_WSCAP_DBG (in MiB,
// PyTorch's documented CUDA environment variable), so that the memory
// plan can count it.
const CudnnWorkspaceLimit = 1 << 30

// fusedOptimizer says whether the engine uses the fused kernel for an
// optimizer (Decide says so with its reason).
func fusedOptimizer(kind string) bool { return kind == "adam" || kind == "adamw" || kind == "sgd" }

// hasConv says whether g has convolutions (channels_last, cudnn.benchmark).
func hasConv(g *stdlib.Graph) bool {
	for _, n := range g.Nodes {
		if n.Op == "conv" || n.Op == "convtranspose" {
			return true
		}
	}
	return false
}

// hasVolume says whether g has an op on volumes [C, D, H, W] (3-D
// convolutions, pools and upsampling).
func hasVolume(g *stdlib.Graph) bool {
	for _, n := range g.Nodes {
		if len(n.Out) == 4 && n.Op != "input" {
			return true
		}
	}
	return false
}

// cudnnSetup is how the engine runs g's convolutions on a GPU:
// channels_last and cudnn.benchmark (with CUDNN_CONV_WSCAP_DBG) for a
// model of 2-D convolutions, neither where it has volumes, whose 5-D
// tensors channels_last cannot hold. Decide and the memory terms read it.
func cudnnSetup(g *stdlib.Graph) (channelsLast, benchmark bool) {
	on := hasConv(g) && !hasVolume(g)
	return on, on
}

// Decide implements cost.Decider: the torch engine's settings, each
// with its reason, once the precision, the batch and the checkpoint
// segments are known.
func (Cost) Decide(s *cost.Settings) {
	p := s.Plan
	e := &p.Engine
	gpu := p.Device.Kind == plan.BackendGPU
	prec := p.Precision
	switch prec.Compute {
	case "bf16", "fp16":
		e.Autocast = prec.Compute
		e.GradScaler = prec.Compute == "fp16"
		why := "torch.autocast in bf16: matrix products and convolutions run in bf16, the ops autocast keeps in fp32 (losses, softmax, norms' statistics) in fp32, with fp32 master weights and no loss scaling."
		if e.GradScaler {
			why = "torch.autocast in fp16 with a GradScaler: dynamic loss scaling keeps small gradients from underflowing fp16's range."
		}
		s.Decide("autocast", prec.Compute, why)
	case "tf32":
		e.TF32 = true
		s.Decide("tf32", "on", "precision tf32: torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 are set, so fp32 matrix products and convolutions use tensor cores.")
	default:
		if gpu {
			s.Decide("tf32", "off", "precision fp32: TF32 is turned off (matmul and cuDNN flags), so every product is full fp32.")
		}
	}
	if a := s.Memory.Attention; a != "" {
		what := map[bool]string{true: " keeps the heads×tokens² attention probabilities for the backward pass", false: " keeps each row's softmax statistics, no heads×tokens² matrix, for the backward pass"}[a == "math"]
		s.Decide("attention", a, "nn.MultiheadAttention's training forward runs the "+a+" path ("+s.Memory.AttentionWhy+"), which"+what+"; the memory above is priced so.")
	}
	if c := s.Memory.ConvPath; c != "" {
		s.Decide("conv path", c, "on this host "+s.Memory.ConvPathWhy+"; the memory above is priced so.")
	}
	conv := hasConv(s.Graph)
	segs := len(p.Checkpoint.Segments)
	if segs > 0 {
		s.Decide("recompute", fmt.Sprintf("%d segments", segs),
			"torch.utils.checkpoint (non-reentrant) runs exactly the plan's checkpoint segments; a recomputed batchnorm normalises with the batch's statistics without updating its running statistics twice.")
	}
	if !gpu {
		e.LossReadback = "sync"
		s.Decide("torch settings", "eager, sync", "on the CPU: eager mode (torch.compile is used on CUDA only), the optimizer PyTorch's own, each micro-batch's loss read back at once.")
		distributedDecision(s)
		return
	}
	torchDecision(s)
	e.Compile = true
	s.Decide("compile", "where available",
		"torch.compile on CUDA when the worker's torch has it (2.x), else eager; the fusion groups above are what it is given to fuse. The run report says which ran.")
	graphDecision(s, segs > 0)
	if conv && hasVolume(s.Graph) {
		s.Decide("channels_last", "off", "the model has 3-D convolutions, whose 5-D tensors channels_last (a 4-D format) cannot hold.")
	} else if cl, bench := cudnnSetup(s.Graph); cl && bench {
		e.ChannelsLast = true
		s.Decide("channels_last", "on", "the model has convolutions: NHWC tensors let cuDNN use its tensor-core kernels without transposes.")
		e.CudnnBenchmark = true
		s.Decide("cudnn.benchmark", "on", fmt.Sprintf("every training batch has the fixed shape %d×%s (the last of an epoch excepted), so cuDNN times its algorithms once per shape and keeps the fastest.",
			p.BatchSize, shapeString(s.Graph.Input)))
		e.CudnnWorkspaceLimit = CudnnWorkspaceLimit
		s.Decide("cudnn workspace", "at most "+cost.FormatBytes(CudnnWorkspaceLimit),
			fmt.Sprintf("CUDNN_CONV_WSCAP_DBG=%d (MiB) caps what one convolution's algorithm, and cudnn.benchmark's trials, may take, so the memory plan can count it; an algorithm that needs more is not tried.", CudnnWorkspaceLimit>>20))
	}
	if k := p.Optimizer.Kind; fusedOptimizer(k) {
		e.FusedOptimizer = true
		why := fmt.Sprintf("fused %s: one kernel updates every parameter, where the foreach version launches several and keeps temporaries (used where the worker's torch has it: Adam from 1.13, AdamW from 2.0, SGD from 2.3).", k)
		if e.GradScaler {
			why += " Under loss scaling it also takes the GradScaler's found_inf on the device, where a non-fused step reads it back, a host sync every step."
		}
		s.Decide("fused optimizer", "on", why)
	}
	e.PinnedMemory = true
	s.Decide("host to device", "pinned, non-blocking", "the shared memory pipe writes each batch into is registered as page-locked, so the batch goes to the device from there on a copy stream (one host copy) while the step before runs; where CUDA refuses the registration, through a pinned buffer.")
	e.LossReadback = "lagged"
	s.Decide("loss readback", "lagged", "the losses of each optimizer step are read back with the next step's reply, so the host never waits for the GPU between steps; a non-finite loss is caught one step late, before any checkpoint is written.")
	distributedDecision(s)
}

// torchDecision names the torch version the GPU terms were priced for,
// and whether it was assumed.
func torchDecision(s *cost.Settings) {
	v := s.Memory.Version
	if v == "" {
		return
	}
	e := &s.Plan.Engine
	e.Torch, e.VersionAssumed = v, s.Memory.VersionAssumed
	compile := "torch.compile (Inductor's autotuning buffer)"
	if torchMajor(v) < 2 {
		compile = "eager, without torch.compile"
	}
	opt := ""
	if k := s.Plan.Optimizer.Kind; fusedOptimizer(k) {
		opt = map[bool]string{true: ", the fused ", false: ", the foreach "}[fusedIn(k, v)] + k
	}
	why := fmt.Sprintf("the memory above is priced for torch %s: %s%s", v, compile, opt)
	if s.Memory.Attention != "" {
		why += ", attention's " + s.Memory.Attention + " path"
	}
	if s.Memory.VersionAssumed {
		s.Decide("torch", v+" (assumed)", why+". No worker was asked, so the GPU machines' torch is assumed; pipe plan --torch-version prices another, and pipe run its worker's.")
		return
	}
	s.Decide("torch", v, why+".")
}

// distributedDecision explains the data-parallel layout and its traffic.
func distributedDecision(s *cost.Settings) {
	p := s.Plan
	d := &p.Distributed
	sync := syncBatchnorm(s)
	if d.WorldSize <= 1 {
		if sync != nil {
			s.Decide("sync_batchnorm", sync.value, sync.why)
		}
		return
	}
	bn := "batchnorm keeps per-device statistics (DDP's default) and rank 0's running statistics are the ones saved"
	if d.SyncBatchnorm {
		bn = "batchnorm's statistics are the whole step's, over every device (sync_batchnorm)"
	}
	s.Decide("data parallel", fmt.Sprintf("%d devices", d.WorldSize),
		fmt.Sprintf("%d per node × %d nodes, DistributedDataParallel over %s: the batch of %d is per device, each optimizer step averages the gradients of %d samples; %s.",
			d.NProcPerNode, d.NNodes, d.Backend, p.BatchSize, p.EffectiveBatch, bn))
	if sync != nil {
		s.Decide("sync_batchnorm", sync.value, sync.why)
	}
	s.Decide("all-reduce", s.AllReduce, s.AllReduceWhy)
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
func syncBatchnorm(s *cost.Settings) *choice {
	p := s.Plan
	d := &p.Distributed
	req, at := s.SyncBatchnorm, s.At
	layers := 0
	for _, n := range s.Graph.Nodes {
		if n.Op == "batchnorm" {
			layers++
		}
	}
	switch {
	case layers == 0:
		if req == "true" {
			s.Warn(at, "sync-batchnorm-unused", "sync_batchnorm true: the model has no batchnorm",
				fmt.Sprintf("%s has no batchnorm layer, so there are no statistics to share; leave sync_batchnorm out.", p.Model))
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
