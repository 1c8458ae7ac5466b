package planner

import (
	"fmt"
	"strconv"
	"strings"

	"pipe/planner/plan"
)

// The links a data-parallel step's all-reduce crosses, in bytes per
// second each way. The step-time estimate adds the all-reduce's time at
// the slowest link it crosses: between machines the network (WithNetwork,
// pipe's --network), on one machine of GPUs NVLink. Sources in
// docs/design/roofline.md ("Data parallelism").
const (
	// DefaultNetwork is 100 Gb/s: one InfiniBand EDR or 100 GbE port a
	// node, a common cluster interconnect.
	DefaultNetwork = 100e9 / 8
	// NVLinkBandwidth is 300 GB/s each way: an A100's NVLink 3 (twelve
	// links, 600 GB/s in both directions together, NVIDIA's datasheet).
	NVLinkBandwidth = 300e9
)

// WithNetwork gives the bandwidth of the network between machines in
// bytes per second each way (DefaultNetwork when not given or 0), by
// which the step time of a plan on several machines counts the
// all-reduce. On one machine of GPUs the all-reduce goes over NVLink.
func WithNetwork(bytesPerSecond float64) Option {
	return func(c *config) { c.network = bytesPerSecond }
}

// ParseBandwidth reads a bandwidth such as "100Gb/s", "25 Gbit/s" or
// "12.5GB/s" (b: bits, B: bytes; k, M, G, T decimal) into bytes per
// second.
func ParseBandwidth(s string) (float64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != 'e' })
	if i <= 0 {
		return 0, fmt.Errorf("%q: give a bandwidth such as 100Gb/s or 12.5GB/s", s)
	}
	v, err := strconv.ParseFloat(t[:i], 64)
	unit := strings.TrimSuffix(strings.TrimSpace(t[i:]), "/s")
	if err != nil || v <= 0 || unit == "" {
		return 0, fmt.Errorf("%q: give a positive bandwidth such as 100Gb/s or 12.5GB/s", s)
	}
	scale := map[byte]float64{'k': 1e3, 'K': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12}
	if f, ok := scale[unit[0]]; ok {
		v, unit = v*f, unit[1:]
	}
	switch unit {
	case "B":
		return v, nil
	case "b", "bit", "bps":
		return v / 8, nil
	}
	return 0, fmt.Errorf("%q: the unit is b/s or B/s with k, M, G or T before it (100Gb/s, 12.5GB/s)", s)
}

// FormatBandwidth renders bytes per second as bits per second, as links
// are sold: 100 Gb/s, 2.4 Tb/s.
func FormatBandwidth(bytesPerSecond float64) string {
	bits := bytesPerSecond * 8
	for _, u := range []struct {
		f    float64
		name string
	}{{1e12, "Tb/s"}, {1e9, "Gb/s"}, {1e6, "Mb/s"}} {
		if bits >= u.f {
			return strconv.FormatFloat(significant(bits/u.f, 4), 'f', -1, 64) + " " + u.name
		}
	}
	return strconv.FormatFloat(significant(bits/1e3, 4), 'f', -1, 64) + " kb/s"
}

// ringAllReduce is data parallelism's gradient traffic: the fp32
// gradients, DDP's bucket for them, and what each device sends (and
// receives) per optimizer step in a ring all-reduce, 2(W−1)/W of them.
func ringAllReduce(params int64, world int) (grads, bucket, sent int64) {
	grads = mul(params, 4)
	bucket = min(25<<20, max(grads, 1<<20))
	w := int64(max(world, 1))
	return grads, bucket, grads * 2 * (w - 1) / w
}

// allReduceTime adds the gradients' all-reduce to a data-parallel plan's
// step time: its bytes over the link it crosses, counted in full (DDP
// overlaps all but the last bucket with the backward pass, so the step
// lies between StepSeconds without it and with it).
func (pl *planner) allReduceTime() {
	p := pl.plan
	d := p.Distributed
	st := &p.StepTime
	if d.WorldSize <= 1 || st.Bound == "unknown" {
		return
	}
	_, _, sent := ringAllReduce(p.Parameters, d.WorldSize)
	st.Network, st.NetworkBandwidth = "network", pl.cfg.network
	if st.NetworkBandwidth <= 0 {
		st.NetworkBandwidth = DefaultNetwork
	}
	if d.NNodes <= 1 && pl.dev.Kind == plan.BackendGPU {
		st.Network, st.NetworkBandwidth = "NVLink", NVLinkBandwidth
	}
	st.AllReduceSeconds = significant(float64(sent)/st.NetworkBandwidth, 4)
	st.StepSeconds = significant(st.StepSeconds+st.AllReduceSeconds, 4)
	st.SamplesPerSecond = significant(float64(p.BatchSize*p.AccumulationSteps)/st.StepSeconds, 4)
}
