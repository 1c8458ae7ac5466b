package cost

// Floorer is a descriptor's optional facet: the engine's host floor on a
// device kind (plan.BackendCPU, plan.BackendGPU), which the planner sets
// beside the device's roofline in the plan's step time. An engine
// without it states none, and its step time is the roofline alone.
type Floorer interface {
	HostFloor(device string) HostFloor
}

// HostFloor is the time an engine's host spends on a training step
// whatever the device's work: StepSeconds a step at any number of steps
// a command, and CommandSeconds a command (its messages and the run
// loop's turn), shared by the command's steps. Overlaps says the device
// computes while the host prepares the next step (a GPU's kernels are
// queued ahead), so a step takes the longer of the two; without it the
// host's time adds to the compute (the CPU computes on the host's own
// cores). Source says what measured the figures, on what machine. The
// zero value is none known.
type HostFloor struct {
	StepSeconds    float64
	CommandSeconds float64
	Overlaps       bool
	Source         string
}

// Known says the floor holds a figure.
func (f HostFloor) Known() bool { return f.StepSeconds > 0 || f.CommandSeconds > 0 }

// At is the floor a step at k steps a command.
func (f HostFloor) At(k int64) float64 {
	return f.StepSeconds + f.CommandSeconds/float64(max(k, 1))
}
