package stdlib

// This file holds the primitive ops: for each, its shape rule, parameter
// count, forward FLOPs and what it keeps for the backward pass.
//
// FLOPs count a multiply-add as 2 and every other arithmetic operation,
// comparison or transcendental function as 1. Reductions inside
// normalisation are counted; index arithmetic and copies are not.
//
// What an op keeps for backward follows PyTorch's autograd
// (tools/autograd/derivatives.yaml): an op keeps what its backward formula
// reads. A kept tensor that is some node's output is listed in Node.Keep,
// so when a conv keeps the output of the relu before it, which the relu
// also keeps, the graph counts it once. Per-channel statistics of
// batchnorm are per batch, not per sample, and are left out.

import (
	"fmt"
	"strings"
)

// OpInfo documents a primitive op: what it computes, its shape rule, and
// what it keeps for backward.
type OpInfo struct {
	Name  string
	Doc   string
	Shape string
	Saved string
}

var opInfos = []*OpInfo{
	{"input", "The model's input.", "the model's input shape", "nothing"},
	{"conv", "2-D convolution (Channels, Kernel, Stride, Padding, Dilation, Groups, Bias).",
		"[C, H, W] to [Channels, (H+2P-D(K-1)-1)/S+1, same for W]", "its input (for the weight gradient)"},
	{"convtranspose", "2-D transposed convolution (Channels, Kernel, Stride, Padding, Bias).",
		"[C, H, W] to [Channels, (H-1)S-2P+K, same for W]", "its input"},
	{"dense", "Affine map of the last axis (Units, Bias).", "[..., F] to [..., Units]", "its input"},
	{"sketched_dense", "x·Σ U_i V_i + b (Units, Terms, Rank, Bias).", "[F] to [Units]",
		"its input, and privately the Terms×Rank products x·U_i (for the V_i gradients)"},
	{"batchnorm", "Batch normalisation over axis 0 (Eps, Momentum).", "unchanged",
		"its input (the per-channel mean and inverse deviation are per batch)"},
	{"layernorm", "Normalisation over the last axis (Eps).", "unchanged",
		"its input, and privately a mean and an inverse deviation per row"},
	{"relu", "max(x, 0).", "unchanged", "its output"},
	{"gelu", "x·Φ(x).", "unchanged", "its input"},
	{"sigmoid", "1/(1+e^-x).", "unchanged", "its output"},
	{"tanh", "tanh(x).", "unchanged", "its output"},
	{"softmax", "Softmax over axis 0.", "unchanged", "its output"},
	{"maxpool", "Maximum over windows (Kernel, Stride, Padding).", "[C, H, W] to [C, (H+2P-K)/S+1, same for W]",
		"its input, and 8-byte indices of the maxima (SavedAux)"},
	{"avgpool", "Average over windows (Kernel, Stride, Padding).", "[C, H, W] to [C, (H+2P-K)/S+1, same for W]",
		"its input (PyTorch keeps it though only its size is read)"},
	{"gap", "Global average pool (Keepdims).", "[C, H, W] to [C] (or [C, 1, 1])",
		"its input (as PyTorch's adaptive_avg_pool2d does)"},
	{"dropout", "Zeroes elements with probability P and scales the rest.", "unchanged",
		"a 1-byte mask per element (SavedAux); nothing when P is 0"},
	{"flatten", "Reshape to a vector.", "[C, H, W] to [C·H·W]", "nothing"},
	{"upsample", "Resize of H and W (Scale, Mode, AlignCorners).", "[C, H, W] to [C, Scale·H, Scale·W] or Out",
		"nothing (backward needs only the sizes)"},
	{"concat", "Joins its inputs along axis 0.", "[C1, ...] and [C2, ...] to [C1+C2, ...]", "nothing"},
	{"add", "Elementwise sum of its inputs.", "equal shapes, unchanged", "nothing"},
	{"tokens", "Turns a feature map into a sequence of tokens.", "[C, H, W] to [H·W, C]", "nothing"},
	{"class_token", "Prepends a learned token.", "[T, D] to [T+1, D]", "nothing"},
	{"pos_embed", "Adds a learned position embedding.", "unchanged", "nothing"},
	{"select_token", "Takes the first token.", "[T, D] to [D]", "nothing"},
	{"mean_tokens", "Averages the tokens.", "[T, D] to [D]", "nothing"},
	{"attention", "Multi-head self-attention with input and output projections (Heads, P: dropout on the probabilities, Causal).", "[T, D] unchanged",
		"its input, and privately q, k, v (3·T·D), the attention probabilities (Heads·T·T) and the heads' output (T·D); with dropout a 1-byte mask per probability (SavedAux)"},
	{"random_attention", "Performer (FAVOR+) self-attention, Panther's RandMultiHeadAttention: q, k, v and output projections, per head φ(q)·(φ(k)ᵀ·v) / φ(q)·Σφ(k) with M fixed random features (Heads, Features, Causal, Mode: softmax or relu); the features are Buffers.", "[T, D] unchanged",
		"its input, and privately q, k, v and the heads' output (4·T·D), φ(q) and φ(k) (2·Heads·T·Features) and the argmax of each feature map's stabiliser (Heads·T + Heads)"},
}

// Ops lists the primitive ops a Graph is made of, with their rules.
func Ops() []*OpInfo { return opInfos }

// shapeStr renders a shape as "[64, 7, 7]".
func shapeStr(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func cloneShape(s []int64) []int64 { return append([]int64(nil), s...) }

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
