package planner

import (
	"fmt"
	"math"

	"pipe/planner/cost"
)

// The unit of steps (plan.StepsPerCommand): how many optimizer steps the
// run loop hands the engine at once. A unit costs the host one message
// each way and the run loop's turn (the engine's host floor a command,
// cost.HostFloor; docs/design/torch-protocol.md), so a small model's
// step of a fraction of a millisecond loses a large share of its time to
// them one step at a time; in units of several milliseconds it loses a
// percent or less. Stops, checkpoints, evaluation and progress output
// fall between units. A unit's batches are held side by side: the run
// loop holds K in pipe's process (plan.Loader.Held), and each of the
// torch worker's input slots K (plan.Memory.Input on the CPU, where the
// worker's memory is the plan's).

// commandSeconds is the work a unit of steps is sized to hold.
const commandSeconds = 5e-3

// maxStepsPerCommand bounds a unit: its batches lie side by side in the
// engine's input memory, and an interrupt waits for the unit in flight.
const maxStepsPerCommand = 32

// commandInputBytes bounds the input memory a unit's batches take.
const commandInputBytes = 64 << 20

// stepsPerCommand decides plan.StepsPerCommand from the step's work (the
// roofline with the engine's host floor a step), with its reason; a step
// at a time wherever a step needs the run loop between its micro-batches
// or its ranks. Then the step time takes the host floor at that unit and
// the memory the unit's batches.
func (pl *planner) stepsPerCommand() {
	pl.decideSteps()
	pl.hostFloorTime()
	pl.holdBatches()
}

func (pl *planner) decideSteps() {
	p := pl.plan
	one := func(why string) {
		p.StepsPerCommand = 1
		pl.decide("steps per command", "1", why)
	}
	st := p.StepTime
	switch {
	case pl.traits().InProcess:
		one(fmt.Sprintf("the %s engine computes in pipe's process, where a step costs no message, so one at a time loses nothing (and holds no more batches than the memory above counts).", pl.eng.Name()))
		return
	case pl.sp.GAN != nil:
		one("gan mode: the discriminator's and the generator's steps take turns, one at a time.")
		return
	case p.AccumulationSteps > 1:
		one(fmt.Sprintf("each optimizer step accumulates %d micro-batches, which the run loop hands the engine one by one.", p.AccumulationSteps))
		return
	case p.WorldSize() > 1:
		one(fmt.Sprintf("the %d ranks agree on a stop with every step, so each step is its own command.", p.WorldSize()))
		return
	case st.Bound == "unknown" || !(st.StepSeconds > 0):
		one("the step time is not known, so the steps are sent one at a time.")
		return
	}
	work, what := pl.stepWork()
	k := int64(math.Ceil(commandSeconds / work))
	k = min(max(k, 1), maxStepsPerCommand)
	in := p.BatchSize * max(p.Loader.SampleBytes, 1)
	bound := fmt.Sprintf("at most %d, and %s of batches", maxStepsPerCommand, FormatBytes(commandInputBytes))
	if byBytes := max(commandInputBytes/in, 1); k > byBytes {
		k = byBytes
	}
	if room := pl.unitRoom(); k > room {
		k, bound = room, fmt.Sprintf("at most %d: a step more a command holds %s more, and the memory has room for %d", room, FormatBytes(pl.unitBytes()), room)
	}
	p.StepsPerCommand = k
	if k == 1 {
		pl.decide("steps per command", "1", fmt.Sprintf("a step takes about %s (%s), more than the %s a command is sized to hold, so each step is its own command.",
			FormatSeconds(work), what, FormatSeconds(commandSeconds)))
		return
	}
	pl.decide("steps per command", fmt.Sprint(k), fmt.Sprintf(
		"a step takes about %s (%s), so %d steps make a command of about %s (%s): the engine runs them with no message between them, and stops, checkpoints, evaluation and progress fall between commands.",
		FormatSeconds(work), what, k, FormatSeconds(float64(k)*work), bound))
}

// hostFloor is the plan's engine's host floor on its device, none where
// the engine states none.
func (pl *planner) hostFloor() cost.HostFloor {
	if f, ok := pl.eng.(cost.Floorer); ok {
		return f.HostFloor(pl.dev.Kind)
	}
	return cost.HostFloor{}
}

// stepWork is a step's time without its share of a command: the roofline
// with the host floor a step (the longer of the two where the device
// overlaps the host, else their sum), and how it was reckoned.
func (pl *planner) stepWork() (float64, string) {
	roof, f := pl.plan.StepTime.StepSeconds, pl.hostFloor()
	switch {
	case f.StepSeconds <= 0:
		return roof, "roofline estimate"
	case f.Overlaps && f.StepSeconds >= roof:
		return f.StepSeconds, fmt.Sprintf("the engine's host floor a step, over the roofline's %s", FormatSeconds(roof))
	case f.Overlaps:
		return roof, "roofline estimate, over the engine's host floor"
	}
	return roof + f.StepSeconds, fmt.Sprintf("roofline estimate %s and the engine's host floor %s a step", FormatSeconds(roof), FormatSeconds(f.StepSeconds))
}

// hostFloorTime sets the engine's host floor beside the roofline in the
// plan's step time, at the plan's steps per command: the longer of the
// two where the device overlaps the host, else their sum; the bound is
// "host" where the floor is the larger part.
func (pl *planner) hostFloorTime() {
	p := pl.plan
	st, f := &p.StepTime, pl.hostFloor()
	if st.Bound == "unknown" || !(st.StepSeconds > 0) || !f.Known() {
		return
	}
	roof, host := st.StepSeconds, f.At(p.StepsPerCommand)
	st.RooflineSeconds, st.HostSeconds = roof, significant(host, 4)
	st.HostStepSeconds, st.HostCommandSeconds, st.HostOverlaps, st.HostSource = f.StepSeconds, f.CommandSeconds, f.Overlaps, f.Source
	step := roof + host
	if f.Overlaps {
		step = max(roof, host)
	}
	pl.rooflineBound = st.Bound
	if host > roof {
		st.Bound = "host"
	}
	st.StepSeconds = significant(step, 4)
	st.SamplesPerSecond = significant(float64(p.BatchSize*p.AccumulationSteps)/st.StepSeconds, 4)
}

// unitBytes is what one more step a command adds to the plan's memory
// total: its batch in each of the torch worker's input slots where the
// plan's total is the worker's (the CPU), none where it is the device's.
func (pl *planner) unitBytes() int64 {
	return mul(pl.cost.unitInput, pl.plan.BatchSize)
}

// unitRoom is the most steps a command whose batches the memory budget
// and the loader's host budget have room for.
func (pl *planner) unitRoom() int64 {
	p := pl.plan
	room := int64(maxStepsPerCommand)
	if u := pl.unitBytes(); u > 0 {
		room = min(room, 1+max(p.Memory.Budget-p.Memory.Total, 0)/u)
	}
	if ld := p.Loader; ld.HostBudget > 0 {
		b := mul(p.BatchSize, ld.SampleBytes)
		room = min(room, max((ld.HostBudget-ld.BufferBytes)/max(b, 1), 1))
	}
	return max(room, 1)
}

// holdBatches prices the unit's batches: the run loop holds them in
// pipe's process beside the loader's (plan.Loader.Held, in BufferBytes
// where the loader's batches are outside the training budget), and the
// torch worker's input slots each hold them side by side.
func (pl *planner) holdBatches() {
	p := pl.plan
	k := max(p.StepsPerCommand, 1)
	if pl.traits().LoaderInBudget {
		return // dataset's free list counts the one training (loaderBatches)
	}
	ld := &p.Loader
	ld.Held = k
	ld.BufferBytes = add(ld.BufferBytes, mul(mul(k, p.BatchSize), ld.SampleBytes))
	if extra := mul(k-1, pl.unitBytes()); extra > 0 {
		m := &p.Memory
		m.Input, m.Total = add(m.Input, extra), add(m.Total, extra)
		p.Fits = m.Total <= m.Budget
		pl.processNote += fmt.Sprintf("; the input slots each hold a unit's %d batches side by side (steps per command), %d batches in all", k, k*int64(max(pl.traits().InputSlots, 1)))
	}
}
