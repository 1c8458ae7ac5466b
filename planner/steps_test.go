package planner

import (
	"fmt"
	"math"
	"strings"
	"testing"

	enginetorch "pipe/engine/torch"
	"pipe/planner/cost"
	"pipe/planner/plan"
)

// TestStepsPerCommand: a small model's steps go to the torch worker
// several to a command, sized by the step time and bounded; a step that
// accumulates micro-batches, one as long as a command, and a step of the
// native engine (in pipe's process: no message to save) go alone. Each
// says why.
func TestStepsPerCommand(t *testing.T) {
	for _, c := range []struct {
		name, model, train, engine string
		lo, hi                     int64
	}{
		{"small mlp", "small", "batch 64", "torch", 2, maxStepsPerCommand},
		{"accumulating", "small", "batch 64 effective_batch 256", "torch", 1, 1},
		{"resnet", "resnet", "batch 64", "torch", 1, 1},
		{"native", "small", "batch 64", "native", 1, 1},
	} {
		src := program(c.model, "cpu", "fp32", c.train)
		if c.model == "small" {
			src = strings.Replace(program("mlp", "cpu", "fp32", c.train), models["mlp"], "input [784]\n  mlp hidden [256, 128] out 10", 1)
		}
		p, ds := planSrc(t, src, WithEngine(c.engine))
		if ds.HasErrors() || p == nil {
			t.Fatalf("%s:\n%v", c.name, ds)
		}
		if k := p.StepsPerCommand; k < c.lo || k > c.hi {
			t.Errorf("%s: %d steps per command, want %d to %d", c.name, k, c.lo, c.hi)
		}
		var why string
		for _, d := range p.Decisions {
			if d.What == "steps per command" {
				why = d.Reason
			}
		}
		if why == "" || (c.name == "accumulating" && !strings.Contains(why, "accumulates 4 micro-batches")) ||
			(c.name == "native" && !strings.Contains(why, "in pipe's process")) {
			t.Errorf("%s: the decision says %q", c.name, why)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// floored is the torch engine's descriptor with a host floor of the
// test's own, whatever the device.
type floored struct {
	enginetorch.Cost
	f cost.HostFloor
}

func (e floored) HostFloor(string) cost.HostFloor { return e.f }

// smallMLP is a plan's source for a small MLP whose roofline step is
// microseconds on a GPU and a fraction of a millisecond on the CPU.
func smallMLP(device string) string {
	return strings.Replace(program("mlp", device, "fp32", "batch 64"), models["mlp"], "input [784]\n  mlp hidden [256, 128] out 10", 1)
}

// TestHostFloorSizesTheUnit: the torch engine's host floor stands beside
// the roofline in the step time (the longer of the two on a GPU, which
// computes while the host queues; their sum on the CPU, which does
// both), the bound says when the floor is the larger, and the unit of
// steps is sized from the step's work with the floor: a GPU step whose
// roofline is microseconds gets a unit of a few steps, not the largest.
func TestHostFloorSizesTheUnit(t *testing.T) {
	for _, dev := range []string{"a100-80gb", "cpu"} {
		p, ds := planSrc(t, smallMLP(dev), WithEngine("torch"))
		if ds.HasErrors() || p == nil {
			t.Fatalf("%s:\n%v", dev, ds)
		}
		kind := plan.BackendGPU
		if dev == "cpu" {
			kind = plan.BackendCPU
		}
		f := enginetorch.Cost{}.HostFloor(kind)
		st := p.StepTime
		roof := st.RooflineSeconds
		if !(roof > 0) || st.HostStepSeconds != f.StepSeconds || st.HostCommandSeconds != f.CommandSeconds || st.HostSource != f.Source {
			t.Fatalf("%s: step time %+v, want the roofline beside the floor %+v", dev, st, f)
		}
		work, step := roof+f.StepSeconds, roof+f.At(p.StepsPerCommand)
		if f.Overlaps {
			work, step = max(roof, f.StepSeconds), max(roof, f.At(p.StepsPerCommand))
		}
		if want := min(int64(math.Ceil(commandSeconds/work)), maxStepsPerCommand); p.StepsPerCommand != want {
			t.Errorf("%s: %d steps per command, want %d: %s of work a step (roofline %s, floor %s)", dev, p.StepsPerCommand, want,
				FormatSeconds(work), FormatSeconds(roof), FormatSeconds(f.StepSeconds))
		}
		if math.Abs(st.StepSeconds-step) > 1e-3*step || math.Abs(st.HostSeconds-f.At(p.StepsPerCommand)) > 1e-3*step {
			t.Errorf("%s: step %s, host %s; want %s, %s", dev, FormatSeconds(st.StepSeconds), FormatSeconds(st.HostSeconds), FormatSeconds(step), FormatSeconds(f.At(p.StepsPerCommand)))
		}
		if wantHost := f.At(p.StepsPerCommand) > roof; (st.Bound == "host") != wantHost {
			t.Errorf("%s: bound %q with roofline %s and floor %s", dev, st.Bound, FormatSeconds(roof), FormatSeconds(f.At(p.StepsPerCommand)))
		}
		if d := decision(p, "step time"); d == nil || !strings.Contains(d.Reason, "host floor") || !strings.Contains(d.Reason, f.Source) ||
			!strings.Contains(d.Value, st.Bound+"-bound") {
			t.Errorf("%s: step time decision %+v", dev, d)
		}
		if dev != "cpu" && (p.StepsPerCommand >= maxStepsPerCommand || st.Bound != "host") {
			t.Errorf("%s: %d steps per command, bound %s: a roofline of %s under a floor of %s should size the unit from the floor",
				dev, p.StepsPerCommand, st.Bound, FormatSeconds(roof), FormatSeconds(f.StepSeconds))
		}
	}
	// The native engine states no floor: the roofline alone.
	p, ds := planSrc(t, smallMLP("cpu"), WithEngine("native"))
	if ds.HasErrors() || p.StepTime.HostSeconds != 0 || p.StepTime.RooflineSeconds != 0 {
		t.Errorf("native: %+v\n%v", p.StepTime, ds)
	}
}

// TestHeldBatchesArePriced: a unit of K steps holds K batches in each of
// the torch worker's input slots (on the CPU the plan's total is the
// worker's) and K in pipe's run loop beside the loader's; the plan
// counts them, K − 1 batches a slot more than a unit of one step.
func TestHeldBatchesArePriced(t *testing.T) {
	at := func(step float64) *plan.Plan {
		f := cost.HostFloor{StepSeconds: step, Source: "the test"}
		src := smallMLP("cpu")
		p, ds := Plan(check(t, "test.pipe", []byte(src)), WithCosts(floored{f: f}), WithHost(testHost), WithSource([]byte(src)), WithEngine("torch"))
		if ds.HasErrors() || p == nil {
			t.Fatalf("floor %g s:\n%v", step, ds)
		}
		return p
	}
	one, unit := at(commandSeconds), at(commandSeconds/8)
	k := unit.StepsPerCommand
	if one.StepsPerCommand != 1 || k < 2 {
		t.Fatalf("%d and %d steps per command, want 1 and several", one.StepsPerCommand, k)
	}
	b := one.BatchSize
	slots := int64(enginetorch.Cost{}.Traits().InputSlots)
	slot := one.Memory.Input / slots // a slot of one batch
	if got, want := unit.Memory.Input-one.Memory.Input, (k-1)*slots*slot; got != want || slot < b*784*4 {
		t.Errorf("input %s at %d steps a command, %s at 1: %s more, want %s (%d slots of %d batches of %s)", FormatBytes(unit.Memory.Input),
			k, FormatBytes(one.Memory.Input), FormatBytes(got), FormatBytes(want), slots, k, FormatBytes(slot))
	}
	if got := unit.Memory.Total - one.Memory.Total; got != (k-1)*slots*slot {
		t.Errorf("total %s more at %d steps a command, want the slots' %s", FormatBytes(got), k, FormatBytes((k-1)*slots*slot))
	}
	if d := decision(unit, "process"); d == nil || !strings.Contains(d.Reason, fmt.Sprintf("a unit's %d batches side by side", k)) {
		t.Errorf("the process decision does not say the slots hold %d batches each: %+v", k, d)
	}
	batch := b * one.Loader.SampleBytes
	if one.Loader.Held != 1 || unit.Loader.Held != k || unit.Loader.BufferBytes-one.Loader.BufferBytes != (k-1)*batch {
		t.Errorf("loader %+v and %+v: want the run loop's 1 and %d held batches of %s counted", one.Loader, unit.Loader, k, FormatBytes(batch))
	}
}

// TestUnitFitsTheMemory: a unit holds no more steps than the memory has
// room for their batches, and says so.
func TestUnitFitsTheMemory(t *testing.T) {
	f := floored{f: cost.HostFloor{StepSeconds: 1e-6, Source: "the test"}}
	host := testHost
	host.MemTotal, host.MemAvailable = 3<<29, 3<<29 // a CPU of 1.5 GiB
	at := func(margin string) *plan.Plan {
		src := smallMLP("cpu")
		if margin != "" {
			src = strings.Replace(src, "batch 64", "batch 64  memory_margin "+margin, 1)
		}
		p, ds := Plan(check(t, "test.pipe", []byte(src)), WithCosts(f), WithHost(host), WithSource([]byte(src)), WithEngine("torch"))
		if ds.HasErrors() || p == nil {
			t.Fatalf("margin %q:\n%v", margin, ds)
		}
		return p
	}
	free := at("")
	m := free.Memory
	unit := m.Input / free.StepsPerCommand // a batch in each slot
	one := m.Total - (free.StepsPerCommand-1)*unit
	// A margin that leaves the budget room for one and a half units more.
	budget := one + unit*3/2
	margin := 1 - float64(budget+m.Reserve)/float64(m.Capacity)
	p := at(fmt.Sprintf("%.9f", margin))
	if free.StepsPerCommand < 3 || p.StepsPerCommand != 2 || !p.Fits {
		t.Fatalf("%d steps a command with room, %d with room for one more (fits %v), want several and 2", free.StepsPerCommand, p.StepsPerCommand, p.Fits)
	}
	if d := decision(p, "steps per command"); d == nil || !strings.Contains(d.Reason, "the memory has room for 2") {
		t.Errorf("decision %+v", d)
	}
}
