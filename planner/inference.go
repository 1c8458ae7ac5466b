package planner

import (
	"fmt"
	"strings"

	"pipe/diag"
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// inference decides predict's arithmetic (plan.Inference): the predict
// block's precision, fp32 unless it says int8. int8 runs on the native
// engine, which quantises the layers stdlib.Int8 names; on another engine
// the plan says fp32 and why.
func (pl *planner) inference() {
	pb := pl.sp.Predict
	if pb == nil {
		return
	}
	inf := &plan.Inference{Precision: "fp32"}
	pl.plan.Inference = inf
	if pb.Precision != "int8" {
		pl.decide("inference precision", "fp32", "predict asks for fp32 (the default; precision int8 quantises conv and dense layers on the native engine).")
		return
	}
	if !pl.traits().Int8 {
		i8 := pl.enginesWith(func(t cost.Traits) bool { return t.Int8 })
		pl.warnf(pb.At.Written("precision"), "int8-engine", "int8 inference needs the "+i8+" engine",
			"predict asks for precision int8, which the %s engine (CPU) runs; this plan's engine is %s, so predict runs in fp32. Write engine %s to predict in int8.", i8, pl.plan.Engine.Name, i8)
		pl.decide("inference precision", "fp32", fmt.Sprintf("int8 runs on the %s engine; the engine is %s.", i8, pl.plan.Engine.Name))
		return
	}
	inf.Precision = "int8"
	inf.CalibrateBatches = 8
	if pb.Calibrate != nil {
		inf.CalibrateBatches = *pb.Calibrate
	}
	var kept []string
	for _, n := range pl.graph.Nodes {
		if ok, why := stdlib.Int8(n); ok {
			inf.Int8Layers = append(inf.Int8Layers, n.Name)
			q, w := stdlib.Int8WeightBytes(n)
			inf.WeightsInt8 += q
			inf.WeightsFP32 += w
		} else if n.Params > 0 && n.Op != "batchnorm" {
			kept = append(kept, fmt.Sprintf("%s (%s)", n.Name, why))
		}
	}
	fp := "every other layer with weights is a batchnorm (folded into its conv, or elementwise)"
	if len(kept) > 0 {
		fp = "fp32 stays for " + strings.Join(kept, ", ")
	}
	pl.decide("inference precision", "int8", fmt.Sprintf(
		"predict asks for int8: %d conv and dense layers with int8 weights per output channel, %s against %s in fp32, activations per tensor, calibrated on %d training batches; %s; layers without weights run in fp32.%s",
		len(inf.Int8Layers), FormatBytes(inf.WeightsInt8), FormatBytes(inf.WeightsFP32), inf.CalibrateBatches, fp, pl.int8Speed(pb.At.Written("precision"))))
}

// int8Speed says which kernel the host's int8 products run and what it
// was measured to buy against fp32, as a sentence to append to a
// decision ("" when the host's kernel is not known), and warns at at
// where int8 is measured slower. int8 is only ever chosen as written: the
// planner never picks it for speed.
func (pl *planner) int8Speed(at *diag.Range) string {
	k := pl.engineHost().Int8
	if k.Name == "" {
		return ""
	}
	if k.Speedup < 1 {
		pl.warnf(at, "int8-slow", "int8 is slower than fp32 on this CPU",
			"int8 runs the %s kernel on this CPU, measured at %.2f× fp32's speed (%s). Predict in fp32 unless int8's smaller weights are the point.",
			k.Name, k.Speedup, k.Measured)
	}
	return fmt.Sprintf(" This CPU runs the %s int8 kernel, measured at %.2f× fp32's speed (%s).", k.Name, k.Speedup, k.Measured)
}
