package planner

import (
	"path/filepath"
	"strings"
	"testing"

	"pipe/planner/plan"
)

// engine/native's memory_plan_test.go holds the CPU model to what the executor
// allocates; these tests check the model's own arithmetic.

func memorySum(m plan.Memory) int64 {
	return sum(m.Parameters, m.Master, m.Gradients, m.Optimizer, m.Activations, m.ActivationGradients,
		m.Workspace, m.Eval, m.Input, m.Loader, m.Runtime, m.Data, m.Checkpoint, m.Headroom)
}

// TestMemoryComponentsSum: where a plan has no GPU terms, Total is the
// sum of the components, so the table pipe plan prints adds up.
func TestMemoryComponentsSum(t *testing.T) {
	for _, path := range examples(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		prog, _ := load(t, path, name)
		for _, dev := range goldenDevices {
			for _, b := range []int64{0, 1, 7} {
				opts := []Option{WithHost(testHost), WithDevice(dev)}
				if b > 0 {
					opts = append(opts, WithBatch(b))
				}
				p, _ := Plan(prog, append([]Option{testCosts}, opts...)...)
				if len(p.Memory.Terms) > 0 {
					continue // a GPU plan's phases: TestGPUTermsMakeTheTotal
				}
				got := memorySum(p.Memory)
				if p.GAN != nil {
					got += p.GAN.Memory.Total // pipe plan's discriminator row
				}
				if got != p.Memory.Total {
					t.Errorf("%s on %s at batch %d: the components add up to %d, the total is %d", name, dev, p.BatchSize, got, p.Memory.Total)
				}
				if dev != "cpu" && (p.Memory.ActivationGradients != 0 || p.Memory.Eval != 0) {
					t.Errorf("%s on %s: CPU-only components are set: %+v", name, dev, p.Memory)
				}
			}
		}
	}
}

// TestCPUWorkspaceIsPerThread: the CPU's scratch is sized per worker
// thread, one per core, and does not grow with the batch.
func TestCPUWorkspaceIsPerThread(t *testing.T) {
	prog, _ := load(t, "../examples/cells.pipe", "cells.pipe")
	ws := func(cores int, b int64) int64 {
		h := testHost
		h.Cores = cores
		p, _ := Plan(prog, testCosts, WithHost(h), WithDevice("cpu"), WithBatch(b))
		return p.Memory.Workspace
	}
	one, two, four := ws(2, 1), ws(2, 16), ws(4, 1)
	if one == 0 || one != two {
		t.Errorf("the scratch changes with the batch: %d at batch 1, %d at 16", one, two)
	}
	if four != 2*one {
		t.Errorf("4 cores get %d bytes of scratch, 2 cores %d", four, one)
	}
}

// TestCPUCheckpointing: on a host too small for cells.pipe's step at
// batch 4, the plan recomputes segments, fits, and its peak is what the
// executor's layout of those segments gives, below the peak without them.
func TestCPUCheckpointing(t *testing.T) {
	prog, _ := load(t, "../examples/cells.pipe", "cells.pipe")
	free, _ := Plan(prog, testCosts, WithHost(testHost), WithDevice("cpu"), WithBatch(4))
	budget := free.Memory.Total - free.Checkpoint.PeakBefore/5
	capacity := int64(float64(budget+free.Memory.Reserve)/0.9) + 1
	h := HostInfo{MemTotal: capacity, MemAvailable: capacity, Cores: testHost.Cores}
	p, ds := Plan(prog, testCosts, WithHost(h), WithDevice("cpu"), WithBatch(4))
	ck := p.Checkpoint
	if ds.HasErrors() || !p.Fits || len(ck.Segments) == 0 {
		t.Fatalf("no fitting plan with segments (fits %v, %d segments):\n%v", p.Fits, len(ck.Segments), ds)
	}
	if ck.PeakAfter >= ck.PeakBefore || ck.PeakBefore != free.Checkpoint.PeakBefore {
		t.Errorf("peak %d with segments, %d without (%d on the large host)", ck.PeakAfter, ck.PeakBefore, free.Checkpoint.PeakBefore)
	}
	m := p.Memory
	if got := m.Activations + m.ActivationGradients + m.Input; got != ck.PeakAfter {
		t.Errorf("the memory's arena parts add up to %d, the checkpoint's peak is %d", got, ck.PeakAfter)
	}
	if m.Activations >= m.ActivationsBefore {
		t.Errorf("activations %d with segments, %d without", m.Activations, m.ActivationsBefore)
	}
}

func TestLargestFitting(t *testing.T) {
	for _, c := range []struct{ start, limit, threshold, want int64 }{
		{1, 100, 1, 1},
		{1, 100, 2, 2},
		{5, 100, 37, 37},
		{5, 100, 1000, 100},
		{0, 4096, 0, 0},
		{0, 4096, 3000, 3000},
		{10, 10, 50, 10},
	} {
		calls := 0
		got := largestFitting(c.start, c.limit, func(b int64) bool { calls++; return b <= c.threshold })
		if got != c.want {
			t.Errorf("largestFitting(%d, %d) with threshold %d = %d, want %d", c.start, c.limit, c.threshold, got, c.want)
		}
		if calls > 30 {
			t.Errorf("largestFitting(%d, %d) tried %d batches", c.start, c.limit, calls)
		}
	}
}
