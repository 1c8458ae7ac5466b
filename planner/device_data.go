package planner

import (
	"fmt"
	"slices"

	"pipe/planner/plan"
)

// dataOnDevice decides plan.DataOnDevice once the step is planned: on
// where the engine can keep a training set on its device
// (cost.Traits.DeviceData), the set's samples can make the loader's
// batches there exactly (DeviceData.Not empty), one device trains, and
// the samples fit the memory the step's plan leaves in the budget; their
// bytes then count in Memory.DeviceData. On the CPU the torch worker
// reads each batch where pipe writes it, with no copy, so the set stays
// in pipe's process unless WithDataOnDevice asks otherwise.
func (pl *planner) dataOnDevice() {
	p := pl.plan
	set := func(on bool, bytes int64, why string) {
		p.DataOnDevice = &plan.DataOnDevice{On: on, Bytes: bytes, Reason: why}
		v := "off"
		if on {
			v = "on"
		}
		pl.decide("data on device", v, why)
	}
	d := pl.cfg.deviceData
	switch {
	case !pl.traits().DeviceData:
		set(false, 0, fmt.Sprintf("the %s engine keeps no training set on its device: each batch is read on the host.", pl.eng.Name()))
		return
	case pl.sp.GAN != nil:
		set(false, 0, "gan mode reads its batches on the host, step by step.")
		return
	case p.WorldSize() > 1:
		set(false, 0, fmt.Sprintf("the %d ranks each read their own rows of a batch on the host.", p.WorldSize()))
		return
	case d == nil:
		set(false, 0, "the plan was made without reading the training source, whose size on a device is not known.")
		return
	case d.Not != "":
		set(false, 0, d.Not+".")
		return
	case p.Backend == plan.BackendCPU && !pl.cfg.onCPU:
		set(false, d.Bytes, "on the CPU the worker reads each batch where pipe writes it, with no copy to a device, so the samples stay in pipe's process.")
		return
	}
	m := &p.Memory
	left := max(m.Budget-m.Total, 0)
	if pl.deviceDataAdds(d.Bytes) > left {
		set(false, d.Bytes, fmt.Sprintf("too large: %s (%s) against the %s the budget leaves after the step's plan; each batch is read on the host.",
			FormatBytes(d.Bytes), d.What, FormatBytes(left)))
		return
	}
	m.DeviceData, m.Total = d.Bytes, add(m.Total, pl.deviceDataTerm(d))
	p.Fits = m.Total <= m.Budget
	set(true, d.Bytes, fmt.Sprintf("%s (%s) fit the %s the budget leaves after the step's plan: sent to the device once, then each command carries its batches' sample indices, which the device gathers, normalises and lays out.",
		FormatBytes(d.Bytes), d.What, FormatBytes(left)))
}

// deviceDataTerm adds the training set's samples to a GPU plan's terms
// and phases (live in each; the worker holds the bytes as one tensor,
// the labels and the 256-value table as two small ones) and returns what
// it adds to the total: the device's memory, or on the CPU the worker's.
func (pl *planner) deviceDataTerm(d *DeviceData) int64 {
	m := &pl.plan.Memory
	if len(m.Phases) == 0 {
		return d.Bytes
	}
	res := pl.deviceDataAdds(d.Bytes)
	m.Terms = append(m.Terms, plan.MemoryTerm{Name: "training set on the device", Bytes: d.Bytes, Source: plan.SourceFormula,
		Phases: slices.Clone(phaseNames), Basis: fmt.Sprintf("%s, sent once (data on device); its segments reserve %s", d.What, FormatBytes(res))})
	for i := range m.Phases {
		ph := &m.Phases[i]
		ph.Allocated, ph.Reserved, ph.Device = add(ph.Allocated, d.Bytes), add(ph.Reserved, res), add(ph.Device, res)
	}
	return res
}

// deviceDataAdds is what a training set of the given bytes adds to the
// plan's total: on a GPU the allocator's segments (deviceDataReserved),
// on the CPU the bytes in the worker.
func (pl *planner) deviceDataAdds(bytes int64) int64 {
	if len(pl.plan.Memory.Phases) == 0 {
		return bytes
	}
	return deviceDataReserved(bytes)
}

// deviceDataReserved is what the caching allocator reserves for a
// training set of the given bytes: the samples in a segment of their
// own, rounded up to 2 MiB (a tensor over 10 MiB; a smaller one takes a
// 20 MiB segment, one of 1 MiB or less a 2 MiB block), and a 2 MiB block
// for the labels and the table.
func deviceDataReserved(bytes int64) int64 {
	const mib = 1 << 20
	seg := int64(2 * mib)
	switch {
	case bytes > 10*mib:
		seg = (bytes + 2*mib - 1) / (2 * mib) * (2 * mib)
	case bytes > mib:
		seg = 20 * mib
	}
	return seg + 2*mib
}
