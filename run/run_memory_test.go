package run_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/engine/native"
	"pipe/run"
	"pipe/stdlib"
)

// elsewhereBackend is the native engine with its models measured as if
// they computed in other processes (the torch engine's workers): their
// DeviceMemory is mem, or err.
type elsewhereBackend struct {
	native.Backend
	mem []engine.DeviceMemory
	err error
}

type elsewhereModel struct {
	engine.Model
	b elsewhereBackend
}

func (b elsewhereBackend) Build(g *stdlib.Graph, cfg engine.Config) (engine.Model, error) {
	m, err := b.Backend.Build(g, cfg)
	if err != nil {
		return nil, err
	}
	return elsewhereModel{m, b}, nil
}

func (m elsewhereModel) Capabilities() engine.Capabilities {
	c := m.Model.Capabilities()
	c.Devices = m
	return c
}

func (m elsewhereModel) DeviceMemory() ([]engine.DeviceMemory, error) { return m.b.mem, m.b.err }

// TestWorkersMemoryIsNeverThisProcesses: a run whose engine computes in
// other processes holds the plan to their memory alone. Workers that
// cannot be asked leave it unmeasured, saying why; one that exited gives
// its peak at exit on the CPU, and nothing on a GPU. Before, the first
// case compared the worker's plan with this process's peak.
func TestWorkersMemoryIsNeverThisProcesses(t *testing.T) {
	j := newJob(t, smallCNN)
	for _, c := range []struct {
		name     string
		b        elsewhereBackend
		measured int64
		by, not  string
	}{
		{"gone", elsewhereBackend{err: errors.New("torch: the worker died")}, 0, "", "its workers could not be asked: torch: the worker died"},
		{"cpu at exit", elsewhereBackend{mem: []engine.DeviceMemory{{Device: "cpu", MaxRSS: 300 << 20, AtExit: true}}}, 300 << 20,
			"the torch worker's peak resident memory at its exit", ""},
		{"gpu at exit", elsewhereBackend{mem: []engine.DeviceMemory{{Rank: 2, Device: "cuda:0", MaxRSS: 300 << 20, AtExit: true}}}, 0,
			"", "rank 2's worker exited before it was measured"},
		{"cpu unknown at exit", elsewhereBackend{mem: []engine.DeviceMemory{{Rank: 1, Device: "cpu", AtExit: true}}}, 0,
			"", "rank 1's worker exited before it was measured"},
		{"asked", elsewhereBackend{mem: []engine.DeviceMemory{{Device: "cpu", MaxRSS: 200 << 20}}}, 200 << 20,
			"the torch worker's peak resident memory", ""},
	} {
		res, ds := run.Run(context.Background(), j.plan, j.prog, run.Hooks{}, run.WithBackend(c.b), run.WithThreads(1),
			run.WithBase(j.dir), run.WithCheckpointDir(filepath.Join(j.dir, c.name)), run.WithMaxSteps(1))
		if ds.HasErrors() {
			t.Fatalf("%s: %v", c.name, ds)
		}
		m := res.Memory
		if m.ProcessMaxRSS <= 0 || m.Measured != c.measured || m.MeasuredBy != c.by || m.NotMeasured != c.not {
			t.Errorf("%s: measured %d by %q, not measured %q (this process %d); want %d by %q, not %q",
				c.name, m.Measured, m.MeasuredBy, m.NotMeasured, m.ProcessMaxRSS, c.measured, c.by, c.not)
		}
		if strings.Contains(m.MeasuredBy, "VmHWM") {
			t.Errorf("%s: held to this process's memory", c.name)
		}
	}
}
