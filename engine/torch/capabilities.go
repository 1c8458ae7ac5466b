package torch

import "pipe/engine"

// Capabilities implements engine.Model: queued steps, the devices' own
// memory figures, how the plan was applied, gan mode in the worker, the
// kernels' clock and a worker's death.
func (m *model) Capabilities() engine.Capabilities {
	c := engine.Capabilities{Queue: m, Devices: m, Applied: m, GAN: m, GANParts: m, Profile: m, Liveness: m}
	if len(m.workers) < m.world {
		c.Rows = m.nodeRows
	}
	return c
}

// Lost implements engine.Liveness: died closes when any worker exits.
func (m *model) Lost() <-chan struct{} { return m.died }
