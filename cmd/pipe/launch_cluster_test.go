package main

import (
	"testing"

	"pipe/engine/torch"
	"pipe/planner/plan"
)

// TestShmIsTheEnginesOwn: a pod's /dev/shm is what the plan's engine's
// registration says its workers take (the torch engine's regions), and
// unsized for an engine without workers.
func TestShmIsTheEnginesOwn(t *testing.T) {
	p := &plan.Plan{BatchSize: 8, Parameters: 1000, StepsPerCommand: 1,
		Layers: []plan.Layer{{Out: []int64{10}}}, Loader: plan.Loader{SampleBytes: 4 * 784}}
	p.Engine.Name = plan.EngineTorch
	if got, want := shm(p), torch.SharedMemoryBytes(p); got != want || got <= 0 {
		t.Errorf("torch plan: shm %d, want %d", got, want)
	}
	p.Engine.Name = plan.EngineNative
	if got := shm(p); got != 0 {
		t.Errorf("native plan: shm %d, want 0 (no workers)", got)
	}
}
