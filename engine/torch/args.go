package torch

import (
	"fmt"

	"pipe/engine"
	"pipe/stdlib"
)

// opArgs is the registration list of the ops the worker builds: each
// op's settings under PyTorch's names, as its module in pipe_torch reads
// them. An op missing here has no PyTorch counterpart yet.
var opArgs = map[string]func(a stdlib.OpArgs) Args{
	"input":        noArgs,
	"relu":         noArgs,
	"gelu":         noArgs,
	"sigmoid":      noArgs,
	"tanh":         noArgs,
	"softmax":      noArgs,
	"flatten":      noArgs,
	"concat":       noArgs,
	"tokens":       noArgs,
	"class_token":  noArgs,
	"pos_embed":    noArgs,
	"select_token": noArgs,
	"mean_tokens":  noArgs,
	"add": func(a stdlib.OpArgs) Args {
		if a.FlowScale > 0 && a.FlowScale != 1 {
			return Args{Scale: a.FlowScale}
		}
		return Args{}
	},
	"attention": func(a stdlib.OpArgs) Args {
		return Args{Heads: a.Heads, Dropout: a.P, Causal: a.Causal}
	},
	"random_attention": func(a stdlib.OpArgs) Args {
		return Args{Heads: a.Heads, Features: a.Features, Causal: a.Causal, Kernel: a.Mode}
	},
	"conv": func(a stdlib.OpArgs) Args {
		return Args{OutChannels: a.Channels, KernelSize: a.Kernel, Stride: max(a.Stride, 1),
			Padding: a.Padding, Dilation: max(a.Dilation, 1), Groups: max(a.Groups, 1), Bias: a.Bias}
	},
	"convtranspose": func(a stdlib.OpArgs) Args {
		return Args{OutChannels: a.Channels, KernelSize: a.Kernel, Stride: max(a.Stride, 1),
			Padding: a.Padding, Groups: max(a.Groups, 1), Bias: a.Bias}
	},
	"dense":          func(a stdlib.OpArgs) Args { return Args{OutFeatures: a.Units, Bias: a.Bias} },
	"lowrank_dense":  sketchedArgs,
	"sketched_dense": sketchedArgs,
	"sketched_conv": func(a stdlib.OpArgs) Args {
		return Args{OutChannels: a.Channels, KernelSize: a.Kernel, Stride: max(a.Stride, 1),
			Padding: a.Padding, Terms: a.Terms, Rank: a.Rank, Bias: a.Bias}
	},
	"batchnorm":    func(a stdlib.OpArgs) Args { return Args{Eps: epsOr(a.Eps), Momentum: a.Momentum} },
	"layernorm":    func(a stdlib.OpArgs) Args { return Args{Eps: epsOr(a.Eps)} },
	"leakyrelu":    func(a stdlib.OpArgs) Args { return Args{NegativeSlope: a.Slope} },
	"instancenorm": func(a stdlib.OpArgs) Args { return Args{Eps: epsOr(a.Eps), Affine: a.Affine} },
	"groupnorm":    func(a stdlib.OpArgs) Args { return Args{Groups: a.Groups, Eps: epsOr(a.Eps)} },
	"pixelshuffle": func(a stdlib.OpArgs) Args { return Args{UpscaleFactor: a.Scale} },
	"maxpool":      poolArgs,
	"avgpool":      poolArgs,
	"gap":          func(a stdlib.OpArgs) Args { return Args{Keepdims: a.Keepdims} },
	"dropout":      func(a stdlib.OpArgs) Args { return Args{P: a.P} },
	"upsample": func(a stdlib.OpArgs) Args {
		mode := a.Mode
		if mode == "" {
			mode = "nearest"
		}
		return Args{Mode: mode, AlignCorners: a.AlignCorners}
	},
}

// argsOf is a node's settings under PyTorch's names (opArgs), failing,
// wrapping engine.ErrUnsupported, on an op the worker does not build.
func argsOf(n *stdlib.Node) (Args, error) {
	f := opArgs[n.Op]
	if f == nil {
		return Args{}, fmt.Errorf("%w: node %s: op %s has no PyTorch counterpart in the torch engine yet", engine.ErrUnsupported, n.Name, n.Op)
	}
	return f(n.Args), nil
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
