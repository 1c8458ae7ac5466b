package torch

import "pipe/engine"

// PhasesEnv, set to 1 in pipe's environment (which the workers inherit),
// makes every training command's reply say where its time went in the
// worker (pipe_torch/phases.py); the run report sums them (StepPhases).
// It costs a clock read or two a phase, and on CUDA two events a step.
const PhasesEnv = "PIPE_TORCH_PHASES"

// addPhases adds one command's phase timings.
func (m *model) addPhases(p *stepPhases) {
	if p == nil {
		return
	}
	s := &m.phases
	s.Steps += int64(p.Steps)
	s.Total += p.Total / 1e3
	s.Copy += p.Copy / 1e3
	s.Queue += p.Queue / 1e3
	s.Host += p.Host / 1e3
	s.Device += p.Device / 1e3
	s.DeviceSteps += int64(p.DeviceSteps)
}

// StepPhases implements engine.PhaseTimer.
func (m *model) StepPhases() (engine.StepPhases, bool) {
	return m.phases, m.phases.Steps > 0
}
