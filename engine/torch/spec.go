package torch

import (
	"fmt"

	"pipe/engine"
	"pipe/stdlib"
)

// SpecVersion is the version of the Spec format; the worker reads it from
// the generated pipe_torch/protocol.py and refuses others.
const SpecVersion = 3

// Spec is a model as the worker (pipe_torch/net.py) builds it: pipe's graph
// node by node, the loss, the optimizer, the checkpoint segments and the
// engine settings of the plan. The benchmark (bench/torchspec) writes the
// same Spec, so one translation serves the engine and the comparison.
type Spec struct {
	Version int `json:"version"`
	// Name is the pipeline's name; File the .pipe file it came from.
	Name string `json:"name"`
	File string `json:"file,omitempty"`
	// Batch is the micro-batch a device trains, Threads the compute
	// threads of the worker (0: torch's default).
	Batch   int `json:"batch"`
	Threads int `json:"threads"`
	// Input and OutShape are one sample's input and output shapes;
	// Output is the ID of the output node.
	Input    []int64 `json:"input"`
	OutShape []int64 `json:"out_shape"`
	Output   int     `json:"output"`
	// Params is pipe's count of trainable parameters.
	Params int64 `json:"params"`
	// Loss is the loss kind (engine.Loss), Optimizer the optimizer.
	Loss      string    `json:"loss"`
	Optimizer Optimizer `json:"optimizer"`
	Nodes     []Node    `json:"nodes"`
	// Seed keys dropout's masks (with the micro-batch and the rank).
	Seed uint64 `json:"seed"`
	// Segments are the plan's checkpoint segments, node IDs, both ends
	// included.
	Segments []Segment `json:"segments"`
	// ZeroGrad names the parameters whose gradient is zero in exact
	// arithmetic (stdlib's Graph.ZeroGradients): after each backward pass
	// the worker sets theirs to zero, as the native engine does, rather
	// than let the optimizer step on rounding noise.
	ZeroGrad []string `json:"zero_grad"`
	// Engine is how the plan is applied.
	Engine Engine `json:"engine"`

	// The benchmark's extras: Data names the file, beside the spec, of
	// little-endian float32 values that Tensors index; Check is what
	// pipe computed on the batch of Tensors.
	Data    string      `json:"data,omitempty"`
	Tensors []TensorRef `json:"tensors,omitempty"`
	Check   *Check      `json:"check,omitempty"`
}

// Optimizer is engine.Optimizer with the learning rate, in PyTorch's terms.
type Optimizer struct {
	Kind        string  `json:"kind"`
	LR          float64 `json:"lr"`
	Momentum    float64 `json:"momentum"`
	Nesterov    bool    `json:"nesterov"`
	WeightDecay float64 `json:"weight_decay"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
}

// Node is one graph node: its op, the IDs of the nodes it reads (in
// order: for concat and add the main flow first), their shapes and its
// own, its parameter count, and the settings its op reads.
type Node struct {
	ID     int       `json:"id"`
	Name   string    `json:"name"`
	Op     string    `json:"op"`
	Inputs []int     `json:"inputs"`
	In     [][]int64 `json:"in"`
	Out    []int64   `json:"out"`
	Params int64     `json:"params"`
	Args   Args      `json:"args,omitzero"`
}

// Args are a node's settings, named as PyTorch names them. Each op sets
// the fields it reads (argsOf) and no other; a zero field is left out of
// the JSON, and the worker reads it back as zero.
type Args struct {
	OutChannels   int64   `json:"out_channels,omitempty"`
	OutFeatures   int64   `json:"out_features,omitempty"`
	KernelSize    int64   `json:"kernel_size,omitempty"`
	Stride        int64   `json:"stride,omitempty"`
	Padding       int64   `json:"padding,omitempty"`
	Dilation      int64   `json:"dilation,omitempty"`
	Groups        int64   `json:"groups,omitempty"`
	Bias          bool    `json:"bias,omitempty"`
	Terms         int64   `json:"terms,omitempty"`
	Rank          int64   `json:"rank,omitempty"`
	Eps           float64 `json:"eps,omitempty"`
	Momentum      float64 `json:"momentum,omitempty"`
	Affine        bool    `json:"affine,omitempty"`
	NegativeSlope float64 `json:"negative_slope,omitempty"`
	UpscaleFactor int64   `json:"upscale_factor,omitempty"`
	Keepdims      bool    `json:"keepdims,omitempty"`
	// P is dropout's probability.
	P float64 `json:"p,omitempty"`
	// Mode and AlignCorners are upsample's interpolation.
	Mode         string `json:"mode,omitempty"`
	AlignCorners bool   `json:"align_corners,omitempty"`
	// Heads, Dropout and Causal are attention's and random_attention's;
	// Features and Kernel random_attention's feature count and map.
	Heads    int64   `json:"heads,omitempty"`
	Dropout  float64 `json:"dropout,omitempty"`
	Causal   bool    `json:"causal,omitempty"`
	Features int64   `json:"features,omitempty"`
	Kernel   string  `json:"kernel,omitempty"`
	// Scale is add's factor on its first input (0: 1).
	Scale float64 `json:"scale,omitempty"`
	// SqueezeChannels is se's (torchvision's SqueezeExcitation's name).
	SqueezeChannels int64 `json:"squeeze_channels,omitempty"`
}

// Segment is a checkpoint segment of node IDs.
type Segment struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// Engine is engine.EngineSettings as the worker reads them, with the
// device and, for data parallelism, the rank's place in the process group.
type Engine struct {
	Device         string `json:"device"`
	Autocast       string `json:"autocast,omitempty"`
	GradScaler     bool   `json:"grad_scaler"`
	TF32           bool   `json:"tf32"`
	CudnnBenchmark bool   `json:"cudnn_benchmark"`
	// CudnnWorkspaceMiB becomes CUDNN_CONV_WSCAP_DBG (0: unset).
	CudnnWorkspaceMiB int64 `json:"cudnn_workspace_mib,omitempty"`
	ChannelsLast      bool  `json:"channels_last"`
	Compile           bool  `json:"compile"`
	// CUDAGraph: capture each step of the plan's batch as one CUDA graph
	// after GraphWarmup eager steps (pipe_torch/graphs.py).
	CUDAGraph      bool         `json:"cuda_graph,omitempty"`
	GraphWarmup    int          `json:"graph_warmup,omitempty"`
	FusedOptimizer bool         `json:"fused_optimizer"`
	Pinned         bool         `json:"pinned"`
	LossReadback   string       `json:"loss_readback"`
	Distributed    *Distributed `json:"distributed,omitempty"`
}

// Distributed is a rank's place in DistributedDataParallel's group.
type Distributed struct {
	Backend    string  `json:"backend"`
	Rank       int     `json:"rank"`
	WorldSize  int     `json:"world_size"`
	MasterAddr string  `json:"master_addr"`
	MasterPort int     `json:"master_port"`
	BucketMB   float64 `json:"bucket_mb"`
	// TimeoutS bounds each collective, RendezvousTimeoutS the wait for
	// every rank to check in at rank 0's store.
	TimeoutS           int `json:"timeout_s"`
	RendezvousTimeoutS int `json:"rendezvous_timeout_s"`
	// AgentStore: the launcher's agent holds the store at the master's
	// port; every rank, rank 0 too, joins it as a client.
	AgentStore bool `json:"agent_store"`
	// AgreeStop: ranks run in several processes, each of which may be
	// asked to stop alone (a signal), so every optimizer step all-reduces
	// the ranks' stop requests (stepRequest.Stop) over a gloo group.
	AgreeStop bool `json:"agree_stop,omitempty"`
	// SyncBatchnorm: batchnorm's batch statistics over every rank's
	// samples (SyncBatchNorm on CUDA, the worker's own over gloo on the
	// CPU, whose tensors torch's refuses).
	SyncBatchnorm bool `json:"sync_batchnorm,omitempty"`
	// Restarts is how often the launcher started this rank again
	// (engine.Config.LauncherRestarts): each rank says its own at the
	// rendezvous, and the build's reply is the world's largest.
	Restarts int `json:"restarts,omitempty"`
}

// TensorRef is a named tensor in the benchmark's data file: Offset and
// the product of Shape count float32 values.
type TensorRef struct {
	Name   string  `json:"name"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"`
}

// Check holds pipe's results on the benchmark's batch "batch.x"/"batch.y"
// with the parameters of Tensors: the output ("check.out") and the mean
// loss in evaluation mode, and the training-mode loss (batch statistics)
// when the model has no active dropout, else nil.
type Check struct {
	EvalLoss  float64  `json:"eval_loss"`
	TrainLoss *float64 `json:"train_loss"`
}

// NewSpec describes g, built with cfg, to the worker; lr is the
// optimizer's learning rate before the first Step sets it. It fails,
// wrapping engine.ErrUnsupported, on an op the worker does not build.
func NewSpec(g *stdlib.Graph, cfg engine.Config, lr float64) (*Spec, error) {
	o := cfg.Optimizer
	s := &Spec{
		Version:  SpecVersion,
		Batch:    cfg.Batch,
		Threads:  cfg.Threads,
		Input:    g.Input,
		OutShape: g.OutShape(),
		Output:   g.Output,
		Params:   g.Params(),
		Loss:     cfg.Loss.Kind,
		Seed:     cfg.Seed,
		Optimizer: Optimizer{Kind: o.Kind, LR: lr, Momentum: o.Momentum, Nesterov: o.Nesterov,
			WeightDecay: o.WeightDecay, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps},
		Segments: []Segment{},
		ZeroGrad: append([]string{}, g.ZeroGradients()...),
	}
	if s.Optimizer.Kind == "" {
		s.Optimizer.Kind = "adam"
	}
	if s.Optimizer.Beta1 == 0 && s.Optimizer.Beta2 == 0 {
		s.Optimizer.Beta1, s.Optimizer.Beta2 = 0.9, 0.999
	}
	if s.Optimizer.Eps == 0 {
		s.Optimizer.Eps = 1e-8
	}
	switch s.Loss {
	case "cross_entropy", "bce", "mse", "mae", "dice":
	default:
		return nil, fmt.Errorf("%w: loss %q (the torch engine has cross_entropy, bce, mse, mae and dice)", engine.ErrUnsupported, s.Loss)
	}
	for _, n := range g.Nodes {
		args, err := argsOf(n)
		if err != nil {
			return nil, err
		}
		s.Nodes = append(s.Nodes, Node{ID: n.ID, Name: n.Name, Op: n.Op, Inputs: nonNil(n.Inputs),
			In: n.In, Out: n.Out, Params: n.Params, Args: args})
	}
	for _, sg := range cfg.Checkpoint {
		if sg.From < 1 || sg.To < sg.From || sg.To >= len(g.Nodes) {
			return nil, fmt.Errorf("torch: checkpoint segment %d..%d is outside the graph's %d nodes", sg.From, sg.To, len(g.Nodes))
		}
		s.Segments = append(s.Segments, Segment{From: sg.From, To: sg.To})
	}
	e := cfg.Engine
	s.Engine = Engine{Device: cfg.Device, Autocast: e.Autocast, GradScaler: e.GradScaler, TF32: e.TF32,
		CudnnBenchmark: e.CudnnBenchmark, ChannelsLast: e.ChannelsLast, Compile: e.Compile, CUDAGraph: e.CUDAGraph,
		FusedOptimizer: e.FusedOptimizer, Pinned: e.PinnedMemory, LossReadback: e.LossReadback,
		CudnnWorkspaceMiB: e.CudnnWorkspaceLimit >> 20}
	if s.Engine.Device == "" {
		s.Engine.Device = "cpu"
	}
	if e.CUDAGraph {
		s.Engine.GraphWarmup = graphWarmup
	}
	if s.Engine.LossReadback == "" {
		s.Engine.LossReadback = "sync"
	}
	return s, nil
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}
