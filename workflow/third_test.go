package workflow_test

import (
	"context"
	"testing"

	"pipe/engine"
	"pipe/engine/enginetest"
	"pipe/engine/native"
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
func (third) Memory(g *stdlib.Graph, s cost.Setup) cost.Memory { return native.Cost{}.Memory(g, s) }

func init() {
	cost.Register(third{})
	engine.Register(engine.Registration{Name: "third", New: func(engine.Setup) engine.Backend {
		return &enginetest.Backend{BackendName: "third", Noise: 0.1}
	}})
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
