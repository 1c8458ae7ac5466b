package torch

import (
	"fmt"

	"pipe/engine"
	"pipe/planner/cost"
	"pipe/stdlib"
)

// torchOp is the torch engine's half of an op in Go: the settings its
// module in pipe_torch reads, under PyTorch's names, and what autograd
// keeps for its backward (the cost model, cost_saved.go). The worker's
// module itself is in pipe_torch/modules.py.
type torchOp struct {
	args func(stdlib.OpArgs) Args
	// saved prices what the op's backward keeps; nil: stdlib's rule at
	// the activation precision.
	saved func(c *savedCtx, nd *stdlib.Node)
	// lowp: autocast copies its weights to low precision (the norms'
	// parameters stay fp32); matmul: it runs cuBLASLt matmuls (addmm with
	// a fused bias); blas: it calls cuBLAS at all, which gives each thread
	// that runs it a workspace (convolutions run on cuDNN and do not).
	lowp, matmul, blas bool
}

// torchOps is the registration list of the ops the worker builds. An op
// missing here has no PyTorch counterpart yet.
var torchOps = map[string]torchOp{
	"input": {args: noArgs, saved: func(c *savedCtx, _ *stdlib.Node) { c.as(4) }},
	"conv": {args: func(a stdlib.OpArgs) Args {
		return Args{OutChannels: a.Channels, KernelSize: a.Kernel, Stride: max(a.Stride, 1),
			Padding: a.Padding, Dilation: max(a.Dilation, 1), Groups: max(a.Groups, 1), Bias: a.Bias}
	}, saved: savedProduct, lowp: true},
	"convtranspose": {args: func(a stdlib.OpArgs) Args {
		return Args{OutChannels: a.Channels, KernelSize: a.Kernel, Stride: max(a.Stride, 1),
			Padding: a.Padding, Groups: max(a.Groups, 1), Bias: a.Bias}
	}, saved: func(c *savedCtx, _ *stdlib.Node) {
		// CPU autocast in PyTorch 1.13 lists conv_transpose2d among its
		// fp32 ops (later versions among the low-precision ones).
		c.as(c.low)
		if !c.gpu {
			c.as(4)
		}
		c.cast(c.x, c.dt[c.i])
	}, lowp: true},
	"dense": {args: func(a stdlib.OpArgs) Args { return Args{OutFeatures: a.Units, Bias: a.Bias} },
		saved: savedProduct, lowp: true, matmul: true, blas: true},
	"lowrank_dense":  {args: sketchedArgs, saved: savedSketched, lowp: true, matmul: true, blas: true},
	"sketched_dense": {args: sketchedArgs, saved: savedSketched, lowp: true, blas: true}, // x for S1's gradient, x·U2_i for S2's
	"sketched_conv": {args: func(a stdlib.OpArgs) Args {
		return Args{OutChannels: a.Channels, KernelSize: a.Kernel, Stride: max(a.Stride, 1),
			Padding: a.Padding, Terms: a.Terms, Rank: a.Rank, Bias: a.Bias}
	}, saved: savedProduct, lowp: true, blas: true}, // x; the projection by the fixed U keeps no activation

	"batchnorm": {args: func(a stdlib.OpArgs) Args { return Args{Eps: epsOr(a.Eps), Momentum: a.Momentum} },
		saved: savedKeepsInput},
	"instancenorm": {args: func(a stdlib.OpArgs) Args { return Args{Eps: epsOr(a.Eps), Affine: a.Affine} },
		saved: func(c *savedCtx, nd *stdlib.Node) {
			// A batch norm of [1, N·C, H, W]: its input (a view) and an
			// fp32 mean and inverse deviation per channel of each sample.
			c.as(c.ex)
			c.keep(c.x)
			c.own(cost.Mul(nd.Out[0], 8))
		}},
	"groupnorm": {args: func(a stdlib.OpArgs) Args { return Args{Groups: a.Groups, Eps: epsOr(a.Eps)} },
		saved: func(c *savedCtx, nd *stdlib.Node) {
			// native_group_norm keeps its input and an fp32 mean and
			// inverse deviation per group of each sample. Under autocast
			// it runs in fp32 (CUDA's autocast casts it; the worker's
			// GroupNorm32 does on the CPU), keeping the fp32 copy.
			c.as(c.ex)
			if c.ac {
				c.as(4)
			}
			c.cast(c.x, c.dt[c.i])
			c.own(cost.Mul(nd.Args.Groups, 8))
		}},
	"layernorm": {args: func(a stdlib.OpArgs) Args { return Args{Eps: epsOr(a.Eps)} },
		saved: func(c *savedCtx, nd *stdlib.Node) {
			c.as(c.ex)
			if c.gpu && c.ac {
				c.as(4)
			}
			c.cast(c.x, c.dt[c.i])
			c.own(cost.Mul(cost.Numel(nd.Out[:len(nd.Out)-1]), 8))
		}},

	"se": {args: func(a stdlib.OpArgs) Args { return Args{SqueezeChannels: a.Channels} },
		saved: func(c *savedCtx, nd *stdlib.Node) {
			// The product keeps the input and the gate; fc1 its pooled
			// input, silu fc1's output, fc2 silu's output: 2C + 2S
			// values a sample in the precision the 1x1 convs run in.
			c.as(c.ex)
			c.keep(c.x)
			c.own(cost.Mul(2*(nd.Out[0]+nd.Args.Channels), c.low))
		}, lowp: true},

	"relu":      {args: noArgs, saved: savedKeepsOutput},
	"sigmoid":   {args: noArgs, saved: savedKeepsOutput},
	"tanh":      {args: noArgs, saved: savedKeepsOutput},
	"gelu":      {args: noArgs, saved: savedKeepsInput},
	"silu":      {args: noArgs, saved: savedKeepsInput},
	"hardswish": {args: noArgs, saved: savedKeepsInput},
	"leakyrelu": {args: func(a stdlib.OpArgs) Args { return Args{NegativeSlope: a.Slope} }, saved: savedKeepsInput},
	"softmax": {args: noArgs, saved: func(c *savedCtx, _ *stdlib.Node) {
		c.as(c.ex)
		if c.gpu && c.ac {
			c.as(4)
		}
		c.keep(c.i)
	}},
	"dropout": {args: func(a stdlib.OpArgs) Args { return Args{P: a.P} },
		saved: func(c *savedCtx, nd *stdlib.Node) {
			c.as(c.ex)
			switch {
			case nd.Args.P <= 0:
				c.base[c.i], c.contig[c.i] = c.base[c.x], c.contig[c.x]
			case c.gpu:
				c.own(c.out) // a bool mask
			default:
				c.own(cost.Mul(c.out, c.ex)) // the scaled noise
			}
		}},

	"drop_path": {args: func(a stdlib.OpArgs) Args { return Args{P: a.P} },
		saved: func(c *savedCtx, nd *stdlib.Node) {
			c.as(c.ex)
			if nd.Args.P <= 0 {
				c.base[c.i], c.contig[c.i] = c.base[c.x], c.contig[c.x]
				return
			}
			c.own(c.ex) // the noise [N, 1, 1, 1]
		}},

	"maxpool": {args: poolArgs, saved: func(c *savedCtx, nd *stdlib.Node) {
		c.as(c.ex)
		if c.offsetPool && poolWindow(nd) <= inductorPoolWindow {
			// Inductor's low-memory max pool: an int8 offset in the
			// window per output, and the input not kept (compiled.go).
			c.own(c.out)
			return
		}
		if len(nd.Out) == 4 && !c.gpu {
			// CPU autocast in PyTorch 1.13 lists max_pool3d among its
			// fp32 ops: it keeps an fp32 copy of a bf16 input.
			c.as(4)
			c.cast(c.x, 4)
		} else {
			c.keep(c.x)
		}
		c.own(cost.Mul(c.out, 8)) // the int64 positions
	}},
	"avgpool":      {args: poolArgs, saved: savedKeepsInput},
	"gap":          {args: func(a stdlib.OpArgs) Args { return Args{Keepdims: a.Keepdims} }, saved: savedKeepsInput},
	"pixelshuffle": {args: func(a stdlib.OpArgs) Args { return Args{UpscaleFactor: a.Scale} }, saved: savedNothing},
	"upsample": {args: func(a stdlib.OpArgs) Args {
		mode := a.Mode
		if mode == "" {
			mode = "nearest"
		}
		return Args{Mode: mode, AlignCorners: a.AlignCorners}
	}, saved: savedNothing},
	"flatten": {args: noArgs, saved: func(c *savedCtx, _ *stdlib.Node) {
		c.as(c.ex)
		if c.contig[c.x] {
			c.base[c.i] = c.base[c.x]
		}
	}},
	"concat": {args: noArgs, saved: savedWidest},
	"add": {args: func(a stdlib.OpArgs) Args {
		if a.FlowScale > 0 && a.FlowScale != 1 {
			return Args{Scale: a.FlowScale}
		}
		return Args{}
	}, saved: savedWidest},

	"tokens":       {args: noArgs, saved: savedStridedView},
	"select_token": {args: noArgs, saved: savedStridedView},
	// A concat with, or a sum with, an fp32 parameter.
	"class_token": {args: noArgs, saved: func(c *savedCtx, _ *stdlib.Node) { c.as(4) }},
	"pos_embed":   {args: noArgs, saved: func(c *savedCtx, _ *stdlib.Node) { c.as(4) }},
	// Measured: PyTorch 1.13's mean over the tokens keeps its input (what
	// attention's output views, a whole [T, N, D]).
	"mean_tokens": {args: noArgs, saved: savedKeepsInput},
	"attention": {args: func(a stdlib.OpArgs) Args {
		return Args{Heads: a.Heads, Dropout: a.P, Causal: a.Causal}
	}, saved: savedAttention, lowp: true, matmul: true, blas: true},
	"random_attention": {args: func(a stdlib.OpArgs) Args {
		return Args{Heads: a.Heads, Features: a.Features, Causal: a.Causal, Kernel: a.Mode}
	}, saved: savedRandomAttention, lowp: true, matmul: true, blas: true},
}

// argsOf is a node's settings under PyTorch's names (torchOps), failing,
// wrapping engine.ErrUnsupported, on an op the worker does not build.
func argsOf(n *stdlib.Node) (Args, error) {
	op, ok := torchOps[n.Op]
	if !ok || op.args == nil {
		return Args{}, fmt.Errorf("%w: node %s: op %s has no PyTorch counterpart in the torch engine yet", engine.ErrUnsupported, n.Name, n.Op)
	}
	return op.args(n.Args), nil
}

func noArgs(stdlib.OpArgs) Args { return Args{} }

// sketchedArgs are lowrank_dense's and sketched_dense's.
func sketchedArgs(a stdlib.OpArgs) Args {
	return Args{OutFeatures: a.Units, Terms: a.Terms, Rank: a.Rank, Bias: a.Bias}
}

// poolArgs are maxpool's and avgpool's; a stride of 0 is the kernel's.
func poolArgs(a stdlib.OpArgs) Args {
	stride := a.Stride
	if stride == 0 {
		stride = a.Kernel
	}
	return Args{KernelSize: a.Kernel, Stride: stride, Padding: a.Padding}
}

func epsOr(e float64) float64 {
	if e <= 0 {
		return 1e-5
	}
	return e
}
