package torch

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"pipe/dataset/samples"
	"pipe/engine"
)

// Keep implements engine.Resident: the samples, their labels and the
// loader's table go to each local rank's worker once, through a
// shared-memory file of their size that the worker copies to its device
// and unmaps (residentRequest). Training batches of indices alone then
// carry the indices (batchRef.Rows).
func (m *model) Keep(r *samples.Resident) error {
	if err := m.usable(); err != nil {
		return err
	}
	n := r.N()
	switch {
	case r.Per != m.xPer:
		return fmt.Errorf("%w: the kept samples hold %d bytes each; the model's input is %v (%d values)", engine.ErrBadBatch, r.Per, m.g.Input, m.xPer)
	case len(r.X) != n*r.Per:
		return fmt.Errorf("%w: %d bytes of samples for %d labels of %d bytes each", engine.ErrBadBatch, len(r.X), n, r.Per)
	case m.gan || m.world > 1:
		return fmt.Errorf("%w: a training set on the device trains one model on one device", engine.ErrInternal)
	}
	lutOff := (len(r.X) + n + 3) / 4 * 4 // the table's floats aligned
	for k := range m.workers {
		reg, err := newRegion("data", lutOff+4*len(r.LUT))
		if err != nil {
			return err
		}
		copy(reg.data, r.X)
		copy(reg.data[len(r.X):], r.Labels)
		for i, v := range r.LUT {
			binary.LittleEndian.PutUint32(reg.data[lutOff+4*i:], math.Float32bits(v))
		}
		_, err = m.callK(k, residentRequest{Path: reg.path, Size: reg.size(), N: n, Per: r.Per, XOff: 0, YOff: len(r.X), LUTOff: lutOff})
		reg.unlink()
		reg.close()
		if err != nil {
			return err
		}
	}
	m.resident = true
	return nil
}

// rowsRef is the batch reference of rows [lo, hi) of a batch of indices
// alone (engine.Resident); ok is false for a batch of samples.
func (m *model) rowsRef(b *samples.Batch, lo, hi int) (ref batchRef, ok bool, err error) {
	if len(b.X) != 0 || len(b.Indices) != b.N {
		return batchRef{}, false, nil
	}
	if !m.resident {
		return batchRef{}, true, fmt.Errorf("%w: a batch of indices, and no training set kept on the device", engine.ErrBadBatch)
	}
	// A copy: the request may be sent after the batch is released.
	return batchRef{N: hi - lo, Rows: slices.Clone(b.Indices[lo:hi])}, true, nil
}
