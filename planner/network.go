package planner

import (
	"fmt"
	"strconv"
	"strings"

	"pipe/planner/plan"
)

// The links a data-parallel step's all-reduce crosses, in bytes per
// second each way: within a machine of GPUs the device's own link
// (plan.Device.Link: NVLink on SXM parts, PCIe on the others), between
// machines the network (WithNetwork, pipe's --network). Sources and the
// hierarchical all-reduce's derivation: docs/design/roofline.md ("Data
// parallelism").
const (
	// DefaultNetwork is 100 Gb/s: one InfiniBand EDR or 100 GbE port a
	// node, a common cluster interconnect.
	DefaultNetwork = 100e9 / 8
	// UnknownLink is the link assumed between the GPUs of a machine when
	// the device names none (a device block, a GPU no profile matches):
	// a PCIe 4.0 x16 slot, 64 GB/s both ways together.
	UnknownLink = 32e9
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

// allReduce is data parallelism's gradient traffic a step, priced.
type allReduce struct {
	// grads are the fp32 gradients; bucket DDP's bucket for them.
	grads, bucket int64
	// link is what each device sends (and receives) over its machine's
	// link, network what each machine sends over the network.
	link, network int64
	// linkBW and netBW in bytes per second each way; linkName the link.
	linkBW, netBW float64
	linkName      string
}

// newAllReduce prices the all-reduce of params parameters on nodes
// machines of nproc devices each. GPUs all-reduce hierarchically, as
// NCCL does across machines: a reduce-scatter and an all-gather over the
// link within each machine, 2(G−1)/G of the gradients a device, and an
// all-reduce between machines of each machine's share, 2(N−1)/N of the
// gradients through the machine's network. CPU ranks (gloo) form one
// flat ring over their sockets, 2(W−1)/W a rank, all at the network's
// rate.
func newAllReduce(params int64, nproc, nodes int, dev plan.Device, network float64) allReduce {
	a := allReduce{grads: mul(params, 4), netBW: network}
	if a.netBW <= 0 {
		a.netBW = DefaultNetwork
	}
	a.bucket = min(25<<20, max(a.grads, 1<<20))
	g, n := int64(max(nproc, 1)), int64(max(nodes, 1))
	if dev.Kind != plan.BackendGPU {
		w := g * n
		a.link = a.grads * 2 * (w - 1) / w
		a.network = a.link
		return a
	}
	a.linkBW, a.linkName = dev.Link, dev.LinkName
	if a.linkBW <= 0 {
		a.linkBW, a.linkName = UnknownLink, "PCIe (assumed)"
	}
	a.link = a.grads * 2 * (g - 1) / g
	a.network = a.grads * 2 * (n - 1) / n
	return a
}

// seconds are the all-reduce's link and network parts. The phases run
// one after another, so their times add.
func (a allReduce) seconds() (link, network float64) {
	if a.linkBW > 0 {
		link = float64(a.link) / a.linkBW
	}
	return link, float64(a.network) / a.netBW
}

// allReduce is the plan's all-reduce.
func (pl *planner) allReduce() allReduce {
	d := pl.plan.Distributed
	return newAllReduce(pl.plan.Parameters, d.NProcPerNode, d.NNodes, pl.dev, pl.cfg.network)
}

// allReduceTime adds the gradients' all-reduce to a data-parallel plan's
// step time, counted in full, and its bytes to the plan's Distributed (DDP overlaps all but the last bucket with
// the backward pass, so the step lies between StepSeconds without it and
// with it).
func (pl *planner) allReduceTime() {
	p := pl.plan
	d := &p.Distributed
	st := &p.StepTime
	if d.WorldSize <= 1 {
		return
	}
	a := pl.allReduce()
	d.BucketBytes, d.AllReduceBytes = a.bucket, a.link
	if a.linkBW == 0 || d.NNodes > 1 {
		d.NetworkBytes = a.network
	}
	if st.Bound == "unknown" {
		return
	}
	link, network := a.seconds()
	st.LinkSeconds, st.NetworkSeconds = significant(link, 4), significant(network, 4)
	st.LinkBandwidth = a.linkBW
	st.Network, st.NetworkBandwidth = "network", a.netBW
	if network == 0 {
		st.Network, st.NetworkBandwidth = a.linkName, a.linkBW
	}
	st.AllReduceSeconds = significant(link+network, 4)
	st.StepSeconds = significant(st.StepSeconds+st.AllReduceSeconds, 4)
	st.SamplesPerSecond = significant(float64(p.BatchSize*p.AccumulationSteps)/st.StepSeconds, 4)
}

// CodeFewerNodes is the code of the warning that fewer machines would
// train about as fast as the plan's.
const CodeFewerNodes = "fewer-nodes"

// fewerNodes warns when fewer machines would train at least 90% as many
// samples a second as the plan's: the same step (effective batch and
// accumulation) on each smaller number of machines that divides it
// evenly, at a batch a device that fits without checkpointing, estimated
// as the plan is (at gives a micro-batch's step time at a batch). The
// network's part of the all-reduce grows with the machines while each
// device's share of the step shrinks (docs/design/roofline.md).
func (pl *planner) fewerNodes(at func(b int64) plan.StepTime, fits func(b int64) bool) {
	p := pl.plan
	d, st := p.Distributed, p.StepTime
	if d.NNodes <= 1 || st.Bound == "unknown" || st.StepSeconds <= 0 || pl.dev.Kind != plan.BackendGPU {
		return
	}
	mine := float64(p.EffectiveBatch) / st.StepSeconds
	for n := 1; n < d.NNodes; n++ {
		per := int64(n*max(d.NProcPerNode, 1)) * p.AccumulationSteps
		if p.EffectiveBatch%per != 0 || !fits(p.EffectiveBatch/per) {
			continue
		}
		s := at(p.EffectiveBatch / per)
		if s.Bound == "unknown" {
			continue
		}
		link, network := newAllReduce(p.Parameters, d.NProcPerNode, n, pl.dev, pl.cfg.network).seconds()
		theirs := float64(p.EffectiveBatch) / (s.StepSeconds + link + network)
		if theirs < 0.9*mine {
			continue
		}
		summary := fmt.Sprintf("%s train about as fast as %d", nodes(n), d.NNodes)
		if theirs > mine {
			summary = fmt.Sprintf("%s would train faster than %d", nodes(n), d.NNodes)
		}
		pl.warnf(nil, CodeFewerNodes, summary,
			"The step of %d samples is estimated at about %.0f samples/s on %d nodes and %.0f on %d: the all-reduce between nodes (%s of the %s step, %s a node over %s) grows with the nodes while each device's share of the step shrinks. "+
				"Use fewer nodes (--nnodes %d), a faster network (--network; a node with a port a GPU has their sum), or a larger batch, whose all-reduce costs the same.",
			p.EffectiveBatch, mine, d.NNodes, theirs, n, FormatSeconds(st.NetworkSeconds), FormatSeconds(st.StepSeconds),
			FormatBytes(d.NetworkBytes), FormatBandwidth(st.NetworkBandwidth), n)
		return
	}
}

func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}
