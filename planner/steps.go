package planner

import (
	"fmt"
	"math"
)

// The unit of steps (plan.StepsPerCommand): how many optimizer steps the
// run loop hands the engine at once. A unit costs the host one message
// each way and the run loop's turn (tens of microseconds with the torch
// worker, docs/design/torch-protocol.md), so a small model's step of a
// fraction of a millisecond loses a large share of its time to them one
// step at a time; in units of several milliseconds it loses a percent or
// less. Stops, checkpoints, evaluation and progress output fall between
// units.

// commandSeconds is the work a unit of steps is sized to hold.
const commandSeconds = 5e-3

// maxStepsPerCommand bounds a unit: its batches lie side by side in the
// engine's input memory, and an interrupt waits for the unit in flight.
const maxStepsPerCommand = 32

// commandInputBytes bounds the input memory a unit's batches take.
const commandInputBytes = 64 << 20

// stepsPerCommand decides plan.StepsPerCommand from the step time, with
// its reason; a step at a time wherever a step needs the run loop between
// its micro-batches or its ranks.
func (pl *planner) stepsPerCommand() {
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
	case p.GAN != nil:
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
	k := int64(math.Ceil(commandSeconds / st.StepSeconds))
	k = min(max(k, 1), maxStepsPerCommand)
	in := p.BatchSize * max(p.Loader.SampleBytes, 1)
	if byBytes := max(commandInputBytes/in, 1); k > byBytes {
		k = byBytes
	}
	p.StepsPerCommand = k
	if k == 1 {
		pl.decide("steps per command", "1", fmt.Sprintf("a step takes about %s (estimate), more than the %s a command is sized to hold, so each step is its own command.",
			FormatSeconds(st.StepSeconds), FormatSeconds(commandSeconds)))
		return
	}
	pl.decide("steps per command", fmt.Sprint(k), fmt.Sprintf(
		"a step takes about %s (estimate), so %d steps make a command of about %s (at most %d, and %s of batches): the engine runs them with no message between them, and stops, checkpoints, evaluation and progress fall between commands.",
		FormatSeconds(st.StepSeconds), k, FormatSeconds(float64(k)*st.StepSeconds), maxStepsPerCommand, FormatBytes(commandInputBytes)))
}
