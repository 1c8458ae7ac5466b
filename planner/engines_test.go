package planner

import (
	"strings"
	"testing"

	"pipe/diag"
	"pipe/engine/native"
	"pipe/planner/cost"
	"pipe/stdlib"
)

// third is a third engine, as one more folder would give it: it prices
// memory as the native engine does, computes in pipe's process on the
// CPU, and has neither int8 nor data parallelism nor words of its own
// (no cost.Explainer).
type third struct{}

func (third) Name() string { return "third" }
func (third) Traits() cost.Traits {
	return cost.Traits{Devices: []string{"cpu"}, InProcess: true, LoaderInBudget: true, DatasetSamples: true}
}
func (third) Memory(g *stdlib.Graph, s cost.Setup) cost.Memory { return native.Cost{}.Memory(g, s) }

// TestThirdEngine plans for an engine the planner has never heard of:
// what it decides follows the engine's traits, its errors name the
// engines that have the trait it lacks, and auto still takes the
// engines that claim the device.
func TestThirdEngine(t *testing.T) {
	prog := check(t, "q.pipe", []byte(int8File))
	engines := WithCosts(append(cost.Registered(), third{})...)
	p, ds := Plan(prog, engines, WithHost(testHost), WithDevice("cpu"), WithEngine("third"))
	if ds.HasErrors() || p == nil {
		t.Fatalf("plan failed:\n%v", ds)
	}
	if p.Engine.Name != "third" || p.Engine.Requested != "third" {
		t.Errorf("engine %+v, want third as written", p.Engine)
	}
	if d := decision(p, "engine"); d == nil || d.Reason != "third as written." {
		t.Errorf("engine decision %+v", d)
	}
	// The loader in the budget, as the native engine's.
	if p.Loader.HostBudget != p.Memory.Budget {
		t.Errorf("loader budget %d, memory budget %d: want the training budget", p.Loader.HostBudget, p.Memory.Budget)
	}
	if p.Inference == nil || p.Inference.Precision != "fp32" {
		t.Errorf("inference %+v: third has no int8", p.Inference)
	}
	var int8Warning string
	for _, d := range ds {
		if d.Code == "int8-engine" {
			int8Warning = d.Summary
		}
	}
	if int8Warning != "int8 inference needs the native engine" {
		t.Errorf("int8 warning %q", int8Warning)
	}

	_, ds = Plan(prog, engines, WithHost(testHost), WithDevice("cpu"), WithEngine("third"), WithDevices(2, 1))
	if !hasCode(ds, "engine-distributed", "data parallelism needs the torch engine") {
		t.Errorf("two devices on third: %v", ds)
	}
	_, ds = Plan(prog, engines, WithHost(testHost), WithDevice("a100-80gb"), WithEngine("third"))
	if !hasCode(ds, "engine-device", "the third engine does not run on") {
		t.Errorf("third on a GPU: %v", ds)
	}
	_, ds = Plan(prog, engines, WithHost(testHost), WithDevice("cpu"), WithEngine("fourth"))
	if !hasCode(ds, "unknown-engine", "unknown engine") || !strings.Contains(ds.Error(), "auto, native, third and torch") {
		t.Errorf("an unknown engine: %v", ds)
	}
	p, _ = Plan(prog, engines, WithHost(testHost), WithDevice("cpu"))
	if p == nil || p.Engine.Name != "native" {
		t.Errorf("engine auto on the CPU with a third engine: %+v", p)
	}
}

// hasCode says whether ds has a diagnostic of the code whose summary
// starts with prefix.
func hasCode(ds diag.Diagnostics, code, prefix string) bool {
	for _, d := range ds {
		if d.Code == code && strings.HasPrefix(d.Summary, prefix) {
			return true
		}
	}
	return false
}
