package torch

import "pipe/planner/plan"

// SharedMemoryBytes is what one rank's regions take in /dev/shm when it
// runs p: its input slots (a sample and twice its output a slot, as
// build sizes them, times the steps of a command, which lie side by side
// in one slot), its outputs, and its state region (the parameters
// and the optimizer's state in fp32, as the checkpoint layout holds
// them), with a quarter more for the evaluation's larger outputs and
// rounding. A pod's /dev/shm is sized from it (pipe launch --k8s).
func SharedMemoryBytes(p *plan.Plan) int64 {
	b := max(p.BatchSize, 1)
	var out int64 = 1
	if n := len(p.Layers); n > 0 {
		out = 1
		for _, d := range p.Layers[n-1].Out {
			out *= max(d, 1)
		}
	}
	in := int64(slots) * b * max(p.StepsPerCommand, 1) * (p.Loader.SampleBytes + 8*out)
	state := 4*p.Parameters + p.Memory.Optimizer
	total := in + 4*b*out + state
	return total + total/4
}
