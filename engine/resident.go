package engine

import "pipe/dataset/samples"

// Resident is implemented by a Model that can keep a training set on its
// device (plan.DataOnDevice, cost.Traits.DeviceData). Keep sends the
// samples once, before the first step; from then on a training batch
// whose X is empty and whose Indices are set (the samples' indices in r)
// is gathered, normalised and laid out on the device, and trains as the
// batch of those samples read on the host would, bit for bit.
type Resident interface {
	Keep(r *samples.Resident) error
}
