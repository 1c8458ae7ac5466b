package stdlib

import "fmt"

// Int8MinK is the smallest inner dimension (input channels × kernel
// taps) of a convolution that runs in int8: below it the product is too
// thin to pay for quantising its input and its output (the first conv of
// a grey-scale image, K = 9).
const Int8MinK = 32

// Int8 says whether node n runs in int8 when a model is quantised for
// inference, and why not when it does not: 2-D convolutions of one group
// with K = ci·k·k of at least Int8MinK, and dense layers. Their weights
// are quantised per output channel; everything else stays fp32. The
// planner states it, and the native engine quantises by it.
func Int8(n *Node) (bool, string) {
	switch n.Op {
	case "conv":
		if len(n.In) == 0 || len(n.In[0]) != 3 {
			return false, "3-D convolution: no int8 kernel"
		}
		ci := n.In[0][0]
		g := max(n.Args.Groups, 1)
		switch {
		case g == ci && g > 1:
			return false, "depthwise convolution: k·k taps per output, no product for int8 to speed up"
		case g != 1:
			return false, "grouped convolution: no int8 kernel"
		}
		if k := ci * n.Args.Kernel * n.Args.Kernel; k < Int8MinK {
			return false, fmt.Sprintf("K = %d (ci·k·k) under %d: too thin a product for int8 to pay", k, Int8MinK)
		}
		return true, ""
	case "dense":
		return true, ""
	case "lowrank_dense":
		return false, "low-rank dense: two thin products through a small rank"
	case "input":
		return false, "the input"
	}
	if n.Params > 0 {
		return false, n.Op + ": no int8 kernel; its weights stay fp32"
	}
	return false, n.Op + ": no weights; fp32 costs little"
}

// Int8WeightBytes is what node n's weights take quantised (int8 weights,
// an fp32 scale and bias per output channel) and in fp32 (weights and
// bias); 0, 0 for a node Int8 keeps in fp32.
func Int8WeightBytes(n *Node) (int8Bytes, fp32Bytes int64) {
	if ok, _ := Int8(n); !ok || len(n.Out) == 0 {
		return 0, 0
	}
	co := n.Out[0]
	if n.Op == "dense" {
		co = n.Out[len(n.Out)-1]
	}
	w := n.Params
	if n.Args.Bias {
		w -= co
	}
	return w + 8*co, 4 * (w + co)
}
