package planner

import (
	"math"

	"pipe/planner/plan"
	"pipe/stdlib"
)

// The step-time estimate is a roofline: each node of a micro-batch takes
// the longer of its FLOPs at the device's peak and its bytes at the
// device's bandwidth, and nodes run one after another. Each node's share
// goes into its plan.Layer's Roofline, so that a profile can hold every
// layer's measured time against it. It ignores launch overheads, the
// loader and overlap, so it is a lower bound on a well-fed device more than
// a forecast; the plan labels it an estimate.
//
// Derivation: docs/design/roofline.md.

func stepTime(g *stdlib.Graph, m *costModel, dev plan.Device, prec plan.Precision, batch, accum int64, recomputed []bool, group []int, fused bool, layers []plan.Layer) plan.StepTime {
	st := plan.StepTime{Estimate: true, Bound: "unknown"}
	peakMM := dev.Peak(prec.Compute)
	if peakMM == 0 {
		peakMM = dev.FP32
	}
	peakEW := dev.FP32
	if peakEW == 0 || dev.Bandwidth == 0 || peakMM == 0 {
		return st
	}
	b := float64(batch)
	pbytes := 4.0
	if prec.Mixed {
		pbytes = 2
	}
	// skipped[i]: node i's output stays inside its fusion group.
	n := len(g.Nodes)
	readers := make([]int, n)
	reader := make([]int, n)
	for _, nd := range g.Nodes {
		for _, j := range nd.Inputs {
			readers[j]++
			reader[j] = nd.ID
		}
	}
	skipped := make([]bool, n)
	if fused {
		for i := range skipped {
			skipped[i] = group[i] != 0 && !m.ch.kept[i] && readers[i] == 1 && i != g.Output && group[reader[i]] == group[i]
		}
	}
	var computeT, memoryT float64
	for _, nd := range g.Nodes {
		if nd.Op == "input" {
			continue
		}
		elem := float64(prec.ActivationBytes)
		var moved float64
		for _, j := range nd.Inputs {
			if !skipped[j] {
				moved += float64(numel(g.Nodes[j].Out)) * elem
			}
		}
		if !skipped[nd.ID] {
			moved += float64(numel(nd.Out)) * elem
		}
		fwdBytes := moved*b + float64(nd.Params)*pbytes
		fwdFLOPs := float64(nd.FLOPs) * b
		passes := 3.0
		if recomputed != nil && recomputed[nd.ID] {
			passes = 4
		}
		flops := fwdFLOPs * passes
		bytes := fwdBytes * passes
		peak := peakEW
		if matmulOps[nd.Op] {
			peak = peakMM
		}
		tc, tm := flops/peak, bytes/dev.Bandwidth
		st.FLOPs += flops
		st.Bytes += bytes
		bound := "compute"
		if tc >= tm {
			computeT += tc
		} else {
			memoryT += tm
			bound = "memory"
		}
		if nd.ID < len(layers) {
			fwd := max(fwdFLOPs/peak, fwdBytes/dev.Bandwidth)
			layers[nd.ID].Roofline = &plan.LayerRoofline{ForwardFLOPs: significant(fwdFLOPs, 4), ForwardBytes: significant(fwdBytes, 4),
				Peak: peak, ForwardSeconds: significant(fwd, 4), BackwardSeconds: significant(fwd*(passes-1), 4), Bound: bound}
		}
	}
	st.MicroBatchSeconds = computeT + memoryT
	// Optimizer: read weights, gradients and state, write weights and state.
	perParam := 4.0 + 4 + 4 + float64(m.buffers)*8
	if prec.Mixed {
		perParam += 4 + 2 // the master weights are the fp32 ones; write the cast copy
	}
	st.OptimizerSeconds = float64(m.params) * perParam / dev.Bandwidth
	st.StepSeconds = st.MicroBatchSeconds*float64(accum) + st.OptimizerSeconds
	if st.StepSeconds > 0 {
		st.SamplesPerSecond = b * float64(accum) / st.StepSeconds
	}
	st.Bound = "memory"
	if computeT >= memoryT {
		st.Bound = "compute"
	}
	// Four significant digits: an estimate has no more, and golden plans
	// stay the same wherever float arithmetic fuses differently.
	for _, x := range []*float64{&st.MicroBatchSeconds, &st.OptimizerSeconds, &st.StepSeconds, &st.SamplesPerSecond, &st.FLOPs, &st.Bytes} {
		*x = significant(*x, 4)
	}
	return st
}

// significant rounds x to n significant digits.
func significant(x float64, n int) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}
