package workflow_test

import (
	"context"
	"testing"

	"pipe/engine"
	"pipe/engine/costs"
	"pipe/engine/enginetest"
	"pipe/engine/native"
	"pipe/planner"
	"pipe/planner/cost"
	"pipe/run"
	"pipe/stdlib"
	"pipe/workflow"
)

// third is a third engine as its own folder would give it: a descriptor
// (the CPU, in pipe's process, memory priced as the native engine's) and
// a run's way to start it, the fake engine, registered once each, as an
// engine's init does. Nothing else names it.
type third struct{}

func (third) Name() string { return "third" }
func (third) Traits() cost.Traits {
	return cost.Traits{Devices: []string{"cpu"}, InProcess: true, LoaderInBudget: true, DatasetSamples: true}
}
func (third) Memory(g *stdlib.Graph, s cost.Setup) cost.Memory {
	thirdPriced = s.Host
	return native.Cost{}.Memory(g, s)
}

// ProbeHost is third's cost.HostProber: what it measures of the host.
func (third) ProbeHost() cost.Host {
	return cost.Host{Kernels: "third's kernels", Own: thirdFacts{cache: 7}}
}

type thirdFacts struct{ cache int }

// thirdPriced is the host facts third's cost model was last given.
var thirdPriced cost.Host

func init() {
	cost.Register(third{})
	engine.Register(engine.Registration{Name: "third", New: func(engine.Setup) engine.Backend {
		return &enginetest.Backend{BackendName: "third", Noise: 0.1}
	}})
}

// TestThirdEngineReadsItsHost: the host's facts are gathered through
// each engine's descriptor (workflow.DetectHost asks its
// cost.HostProber), and the planner hands the engine its own, which no
// one else reads, as it prices the plan.
func TestThirdEngineReadsItsHost(t *testing.T) {
	h := workflow.DetectHost()
	if got := h.Engines["third"]; got.Kernels != "third's kernels" || got.Own != (thirdFacts{cache: 7}) {
		t.Fatalf("DetectHost: third's facts %+v", got)
	}
	for _, e := range costs.Engines() {
		if _, ok := e.(cost.HostProber); ok != (h.Engines[e.Name()] != cost.Host{}) && e.Name() != "third" {
			t.Errorf("%s: prober %v, facts %+v", e.Name(), ok, h.Engines[e.Name()])
		}
	}
	thirdPriced = cost.Host{}
	host := cpuHost(0)().WithEngineHost("third", h.Engines["third"])
	wf := workflow.New(workflow.WithHost(func() planner.HostInfo { return host }))
	pl, ds := wf.Plan(context.Background(), program(t, tinyPipe), workflow.Request{Purpose: workflow.ForPlan, Engine: "third"})
	if pl.Plan == nil || ds.HasErrors() {
		t.Fatal(ds)
	}
	if thirdPriced.Own != (thirdFacts{cache: 7}) {
		t.Errorf("third was priced with %+v, not its own facts", thirdPriced)
	}
}

// TestThirdEngineRuns plans, starts and runs an engine that workflow and
// run have never heard of, through its registration alone: the plan
// names it, RunEngines starts it and no other, and the run trains on it.
func TestThirdEngineRuns(t *testing.T) {
	prog := program(t, tinyPipe)
	var calls int
	wf := workflow.New(workflow.WithHost(cpuHost(0)), probe(&calls, 0, nil))
	pl, ds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForRun, Engine: "third"})
	if pl.Plan == nil || ds.HasErrors() {
		t.Fatal(ds)
	}
	if pl.Plan.EngineName() != "third" || !pl.Traits().InProcess {
		t.Fatalf("planned engine %s, traits %+v", pl.Plan.EngineName(), pl.Traits())
	}
	engines, err := wf.RunEngines(pl, engine.Place{})
	if err != nil || len(engines) != 1 || engines[0].Name() != "third" || calls != 0 {
		t.Fatalf("engines %v, err %v, %d probes (third has no worker to ask)", engines, err, calls)
	}
	res, ds := run.Run(context.Background(), pl.Plan, pl.Program, run.Hooks{}, run.WithBackend(engines[0]),
		run.WithMaxSteps(2), run.WithBase(t.TempDir()))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if res.Engine != "third" || res.Position.Step != 2 {
		t.Errorf("ran on %q for %d steps", res.Engine, res.Position.Step)
	}
}
