package torch

import "pipe/engine"

// Capabilities implements engine.Model: queued steps, the devices' own
// memory figures, how the plan was applied, gan mode in the worker and
// the kernels' clock.
func (m *model) Capabilities() engine.Capabilities {
	return engine.Capabilities{Queue: m, Devices: m, Applied: m, GAN: m, GANParts: m, Profile: m}
}
