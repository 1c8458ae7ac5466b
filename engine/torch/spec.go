package torch

import (
	"fmt"

	"pipe/engine"
	"pipe/stdlib"
)

// SpecVersion is the version of the Spec format; the worker refuses
// others.
const SpecVersion = 2

// Spec is a model as the worker (pipe_torch.py) builds it: pipe's graph
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
// own, its parameter count, and the settings its op reads, named as
// PyTorch names them.
type Node struct {
	ID     int            `json:"id"`
	Name   string         `json:"name"`
	Op     string         `json:"op"`
	Inputs []int          `json:"inputs"`
	In     [][]int64      `json:"in"`
	Out    []int64        `json:"out"`
	Params int64          `json:"params"`
	Args   map[string]any `json:"args,omitempty"`
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
	CudnnWorkspaceMiB int64        `json:"cudnn_workspace_mib,omitempty"`
	ChannelsLast      bool         `json:"channels_last"`
	Compile           bool         `json:"compile"`
	FusedOptimizer    bool         `json:"fused_optimizer"`
	Pinned            bool         `json:"pinned"`
	LossReadback      string       `json:"loss_readback"`
	Distributed       *Distributed `json:"distributed,omitempty"`
}

// Distributed is a rank's place in DistributedDataParallel's group.
type Distributed struct {
	Backend    string  `json:"backend"`
	Rank       int     `json:"rank"`
	WorldSize  int     `json:"world_size"`
	MasterAddr string  `json:"master_addr"`
	MasterPort int     `json:"master_port"`
	BucketMB   float64 `json:"bucket_mb"`
	TimeoutS   int     `json:"timeout_s"`
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
		CudnnBenchmark: e.CudnnBenchmark, ChannelsLast: e.ChannelsLast, Compile: e.Compile,
		FusedOptimizer: e.FusedOptimizer, Pinned: e.PinnedMemory, LossReadback: e.LossReadback,
		CudnnWorkspaceMiB: e.CudnnWorkspaceLimit >> 20}
	if s.Engine.Device == "" {
		s.Engine.Device = "cpu"
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

// argsOf is a node's settings under PyTorch's names, for the ops the
// worker builds.
func argsOf(n *stdlib.Node) (map[string]any, error) {
	a := n.Args
	switch n.Op {
	case "add":
		if a.FlowScale > 0 && a.FlowScale != 1 {
			return map[string]any{"scale": a.FlowScale}, nil
		}
		return nil, nil
	case "input", "relu", "gelu", "sigmoid", "tanh", "softmax", "flatten", "concat",
		"tokens", "class_token", "pos_embed", "select_token", "mean_tokens":
		return nil, nil
	case "attention":
		return map[string]any{"heads": a.Heads, "dropout": a.P, "causal": a.Causal}, nil
	case "random_attention":
		return map[string]any{"heads": a.Heads, "features": a.Features, "causal": a.Causal, "kernel": a.Mode}, nil
	case "conv":
		return map[string]any{"out_channels": a.Channels, "kernel_size": a.Kernel, "stride": max(a.Stride, 1),
			"padding": a.Padding, "dilation": max(a.Dilation, 1), "groups": max(a.Groups, 1), "bias": a.Bias}, nil
	case "convtranspose":
		return map[string]any{"out_channels": a.Channels, "kernel_size": a.Kernel, "stride": max(a.Stride, 1),
			"padding": a.Padding, "groups": max(a.Groups, 1), "bias": a.Bias}, nil
	case "dense":
		return map[string]any{"out_features": a.Units, "bias": a.Bias}, nil
	case "lowrank_dense":
		return map[string]any{"out_features": a.Units, "terms": a.Terms, "rank": a.Rank, "bias": a.Bias}, nil
	case "sketched_dense":
		return map[string]any{"out_features": a.Units, "terms": a.Terms, "rank": a.Rank, "bias": a.Bias}, nil
	case "sketched_conv":
		return map[string]any{"out_channels": a.Channels, "kernel_size": a.Kernel, "stride": max(a.Stride, 1),
			"padding": a.Padding, "terms": a.Terms, "rank": a.Rank, "bias": a.Bias}, nil
	case "batchnorm":
		return map[string]any{"eps": epsOr(a.Eps), "momentum": a.Momentum}, nil
	case "layernorm":
		return map[string]any{"eps": epsOr(a.Eps)}, nil
	case "leakyrelu":
		return map[string]any{"negative_slope": a.Slope}, nil
	case "instancenorm":
		return map[string]any{"eps": epsOr(a.Eps), "affine": a.Affine}, nil
	case "pixelshuffle":
		return map[string]any{"upscale_factor": a.Scale}, nil
	case "maxpool", "avgpool":
		stride := a.Stride
		if stride == 0 {
			stride = a.Kernel
		}
		return map[string]any{"kernel_size": a.Kernel, "stride": stride, "padding": a.Padding}, nil
	case "gap":
		return map[string]any{"keepdims": a.Keepdims}, nil
	case "dropout":
		return map[string]any{"p": a.P}, nil
	case "upsample":
		mode := a.Mode
		if mode == "" {
			mode = "nearest"
		}
		return map[string]any{"mode": mode, "align_corners": a.AlignCorners}, nil
	}
	return nil, fmt.Errorf("%w: node %s: op %s has no PyTorch counterpart in the torch engine yet", engine.ErrUnsupported, n.Name, n.Op)
}

func epsOr(e float64) float64 {
	if e <= 0 {
		return 1e-5
	}
	return e
}
