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
	{"conv", "2-D convolution (Channels, Kernel, Stride, Padding, Dilation, Groups, Bias); 3-D on a volume (conv3d: Dilation and Groups 1).",
		"[C, H, W] to [Channels, (H+2P-D(K-1)-1)/S+1, same for W]; [C, D, H, W] likewise per axis", "its input (for the weight gradient)"},
	{"convtranspose", "2-D transposed convolution (Channels, Kernel, Stride, Padding, Bias); 3-D on a volume (convtranspose3d).",
		"[C, H, W] to [Channels, (H-1)S-2P+K, same for W]; [C, D, H, W] likewise per axis", "its input"},
	{"dense", "Affine map of the last axis (Units, Bias).", "[..., F] to [..., Units]", "its input"},
	{"lowrank_dense", "x·Σ U_i V_i + b (Units, Terms, Rank, Bias).", "[F] to [Units]",
		"its input, and privately the Terms×Rank products x·U_i (for the V_i gradients)"},
	{"sketched_dense", "Panther's SKLinear: 1/(2L)·Σ (x·S1_i·U1_i + x·U2_i·S2_i) + b (Units, Terms L, Rank k, Bias); U fixed (Buffers).",
		"[F] to [Units]", "its input, and privately the L·k values x·U2_i (for the S2 gradients)"},
	{"sketched_conv", "Panther's SKConv2d: 1/(2L)·Σ U_iᵀ·(S_i ⋆ x) + b (Channels, Kernel, Stride, Padding, Terms L, Rank k, Bias); U fixed (Buffers).",
		"[C, H, W] to [Channels, (H+2P-K)/S+1, same for W]", "its input"},
	{"batchnorm", "Batch normalisation over axis 0 (Eps, Momentum).", "unchanged",
		"its input (the per-channel mean and inverse deviation are per batch)"},
	{"layernorm", "Normalisation over the last axis (Eps).", "unchanged",
		"its input, and privately a mean and an inverse deviation per row"},
	{"relu", "max(x, 0).", "unchanged", "its output"},
	{"gelu", "x·Φ(x).", "unchanged", "its input"},
	{"leakyrelu", "x, or Slope·x below 0.", "unchanged", "its input"},
	{"instancenorm", "Normalisation of each channel of each sample over H and W (Eps, Affine).", "unchanged",
		"its input, and privately a mean and an inverse deviation per channel"},
	{"pixelshuffle", "Sub-pixel rearrangement (Scale).", "[C·Scale², H, W] to [C, Scale·H, Scale·W]", "nothing"},
	{"sigmoid", "1/(1+e^-x).", "unchanged", "its output"},
	{"tanh", "tanh(x).", "unchanged", "its output"},
	{"softmax", "Softmax over axis 0.", "unchanged", "its output"},
	{"maxpool", "Maximum over windows (Kernel, Stride, Padding); cubic windows on a volume (maxpool3d).", "[C, H, W] to [C, (H+2P-K)/S+1, same for W]; [C, D, H, W] likewise per axis",
		"its input, and 8-byte indices of the maxima (SavedAux)"},
	{"avgpool", "Average over windows (Kernel, Stride, Padding).", "[C, H, W] to [C, (H+2P-K)/S+1, same for W]",
		"its input (PyTorch keeps it though only its size is read)"},
	{"gap", "Global average pool (Keepdims).", "[C, H, W] or [C, D, H, W] to [C] (or [C, 1, 1], [C, 1, 1, 1])",
		"its input (as PyTorch's adaptive_avg_pool2d does)"},
	{"dropout", "Zeroes elements with probability P and scales the rest.", "unchanged",
		"a 1-byte mask per element (SavedAux); nothing when P is 0"},
	{"flatten", "Reshape to a vector.", "[C, H, W] to [C·H·W]", "nothing"},
	{"upsample", "Resize of H and W (Scale, Mode, AlignCorners); of D, H and W on a volume (upsample3d: nearest or trilinear).", "[C, H, W] to [C, Scale·H, Scale·W] or Out; [C, D, H, W] to [C, Scale·D, Scale·H, Scale·W]",
		"nothing (backward needs only the sizes)"},
	{"concat", "Joins its inputs along axis 0.", "[C1, ...] and [C2, ...] to [C1+C2, ...]", "nothing"},
	{"add", "Elementwise sum of its inputs, the first scaled by add's scale when it is written.", "equal shapes, unchanged", "nothing"},
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
