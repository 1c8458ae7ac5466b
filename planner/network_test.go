package planner

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"pipe/planner/plan"
)

// TestAllReduceTime: a data-parallel plan's step time gains the
// all-reduce, hierarchical on GPUs: within a node over the device's own
// link (NVLink 3 on an A100, NVLink 4 on an H100), 2(G−1)/G of the
// gradients a device; between nodes 2(N−1)/N of them a node over the
// network, ten times longer at a tenth of the bandwidth. One device has
// none. On 4×8 H100s the flat ring of 32 ranks over the network that
// the plan used to charge is 29% above what it charges now.
func TestAllReduceTime(t *testing.T) {
	one := gpuPlan(t, "../examples/pills.pipe", WithBatch(32))
	if one.StepTime.AllReduceSeconds != 0 || one.StepTime.Network != "" {
		t.Errorf("one device: %+v", one.StepTime)
	}
	local := gpuPlan(t, "../examples/pills.pipe", WithBatch(32), WithDevices(8, 1))
	nodes := gpuPlan(t, "../examples/pills.pipe", WithBatch(32), WithDevices(8, 4))
	slow := gpuPlan(t, "../examples/pills.pipe", WithBatch(32), WithDevices(8, 4), WithNetwork(DefaultNetwork/10))
	h100 := gpuPlan(t, "../examples/pills.pipe", WithBatch(32), WithDevices(8, 4), WithDevice("h100-80gb"))
	if local.StepTime.Network != "NVLink 3" || local.StepTime.NetworkBandwidth != 300e9 || local.StepTime.NetworkSeconds != 0 {
		t.Errorf("one machine of A100s: %q at %g B/s, %g s on the network", local.StepTime.Network, local.StepTime.NetworkBandwidth, local.StepTime.NetworkSeconds)
	}
	if nodes.StepTime.Network != "network" || nodes.StepTime.NetworkBandwidth != DefaultNetwork || nodes.StepTime.LinkBandwidth != 300e9 {
		t.Errorf("four machines: %q at %g B/s, link %g B/s", nodes.StepTime.Network, nodes.StepTime.NetworkBandwidth, nodes.StepTime.LinkBandwidth)
	}
	grads := float64(4 * nodes.Parameters)
	link, net := grads*2*7/8, grads*2*3/4
	for _, c := range []struct {
		p      *plan.Plan
		linkBW float64
	}{{nodes, 300e9}, {h100, 450e9}} {
		d, st := c.p.Distributed, c.p.StepTime
		if math.Abs(float64(d.AllReduceBytes)-link) > 8 || math.Abs(float64(d.NetworkBytes)-net) > 8 {
			t.Errorf("%s: %d bytes a device over the link, %d a node over the network; want %.0f and %.0f", c.p.Device.Name, d.AllReduceBytes, d.NetworkBytes, link, net)
		}
		want := link/c.linkBW + net/DefaultNetwork
		if got := st.AllReduceSeconds; math.Abs(got-want) > 1e-3*want || math.Abs(st.LinkSeconds+st.NetworkSeconds-got) > 1e-3*got {
			t.Errorf("%s: all-reduce %g s (%g + %g), want %g", c.p.Device.Name, got, st.LinkSeconds, st.NetworkSeconds, want)
		}
	}
	if flat := grads * 2 * 31 / 32 / DefaultNetwork; math.Abs(flat/h100.StepTime.NetworkSeconds-1.2917) > 1e-3 {
		t.Errorf("a flat ring of 32 is %.4f times the network's part, want 31/24", flat/h100.StepTime.NetworkSeconds)
	}
	if r := slow.StepTime.NetworkSeconds / nodes.StepTime.NetworkSeconds; math.Abs(r-10) > 0.01 {
		t.Errorf("a tenth of the bandwidth: %g times the network's part", r)
	}
	// The roofline holds the all-reduce; the host floor stands beside it.
	base := local.StepTime.Roofline() - local.StepTime.AllReduceSeconds
	if d := nodes.StepTime.Roofline() - base; math.Abs(d-nodes.StepTime.AllReduceSeconds) > 1e-3*nodes.StepTime.Roofline() {
		t.Errorf("step %g s on 4 machines, %g s on one less its all-reduce: the difference is not the all-reduce's %g s", nodes.StepTime.Roofline(), base, nodes.StepTime.AllReduceSeconds)
	}
	why := decision(h100, "step time").Reason
	for _, want := range []string{"within a node", "over NVLink 4 (3.6 Tb/s each way, h100-80gb's)", "between nodes", "100 Gb/s network", "for the job of 32"} {
		if !strings.Contains(why, want) {
			t.Errorf("the step time's reason has no %q: %s", want, why)
		}
	}
}

func TestParseBandwidth(t *testing.T) {
	for s, want := range map[string]float64{"100Gb/s": 12.5e9, "25 Gbit/s": 3.125e9, "12.5GB/s": 12.5e9, "800Mb/s": 1e8, "1.6Tb/s": 2e11} {
		if got, err := ParseBandwidth(s); err != nil || math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: %g, %v; want %g", s, got, err, want)
		}
	}
	for _, s := range []string{"", "fast", "100", "-1Gb/s", "100Gq/s"} {
		if _, err := ParseBandwidth(s); err == nil {
			t.Errorf("%q was read", s)
		}
	}
	if got := FormatBandwidth(12.5e9); got != "100 Gb/s" {
		t.Errorf("FormatBandwidth(12.5e9) = %q", got)
	}
}

// TestRanksShareTheNodesCores: ranks on one node plan their loaders for
// their share of its cores, so that the node's ranks and their workers
// fit it (an sbatch script asks for workers + 1 CPUs a task); on the CPU
// of 2 cores, 2 ranks have one core each and no worker.
func TestRanksShareTheNodesCores(t *testing.T) {
	host := testHost
	host.Cores = 16
	one := gpuPlan(t, "../examples/pills.pipe", WithHost(host), WithBatch(32))
	eight := gpuPlan(t, "../examples/pills.pipe", WithHost(host), WithBatch(32), WithDevices(8, 1))
	if one.Loader.Workers != 8 || eight.Loader.Workers != 1 {
		t.Errorf("16 cores: %d workers for one GPU, %d for each of 8; want 8 and 1", one.Loader.Workers, eight.Loader.Workers)
	}
	prog, _ := load(t, "../examples/fashion_mlp.pipe", "fashion_mlp.pipe")
	cpu, ds := Plan(prog, testCosts, WithHost(testHost), WithDevice("cpu"), WithEngine("torch"), WithDevices(2, 1))
	if cpu == nil {
		t.Fatal(ds)
	}
	why := ""
	for _, d := range cpu.Decisions {
		if d.What == "workers" {
			why = d.Reason
		}
	}
	if cpu.Loader.Workers != 0 || !strings.Contains(why, "1 of the node's 2 cores a rank, as 2 ranks share it") {
		t.Errorf("2 ranks on 2 cores: %d workers: %s", cpu.Loader.Workers, why)
	}
}

// TestSyncBatchnormDecision: sync_batchnorm auto is on for a model with
// batchnorm on several devices below 32 samples a device, off at 32 and
// above, and not decided on one device; as written it is kept; true on a
// model without batchnorm is a warning. The reason says which.
func TestSyncBatchnormDecision(t *testing.T) {
	const src = `pipeline s
source blobs synthetic { samples 640  shape [12]  classes 4  seed 5 }
model net {
  input [12]
  dense 32 bias false -> %s -> relu -> dense 4
}
train { epochs 1  batch %d  optimizer adam lr 0.01  loss cross_entropy %s }
`
	cases := []struct {
		norm, extra string
		batch       int
		nproc       int
		value, why  string // "" value: no decision
	}{
		{"batchnorm", "", 8, 2, "on", "the batch a device is 8, below 32, so each device's batchnorm statistics would come from 8 samples; they come from the 2 devices' 16 instead (Wu and He"},
		{"batchnorm", "", 32, 2, "off", "the batch a device is 32, at least 32"},
		{"batchnorm", "", 8, 1, "", ""},
		{"batchnorm", "sync_batchnorm false", 8, 2, "off", "as written"},
		{"batchnorm", "sync_batchnorm true", 64, 2, "on", "as written"},
		{"batchnorm", "sync_batchnorm true", 8, 1, "off", "one device"},
		{"layernorm", "sync_batchnorm true", 8, 2, "", ""},
	}
	for _, c := range cases {
		p, ds := planSrc(t, fmt.Sprintf(src, c.norm, c.batch, c.extra), WithDevice("cpu"), WithEngine("torch"), WithDevices(c.nproc, 1))
		if p == nil {
			t.Fatal(ds)
		}
		name := fmt.Sprintf("%s batch %d × %d %q", c.norm, c.batch, c.nproc, c.extra)
		d := decision(p, "sync_batchnorm")
		switch {
		case c.value == "" && d != nil:
			t.Errorf("%s: decided %s: %s", name, d.Value, d.Reason)
		case c.value != "" && (d == nil || d.Value != c.value || !strings.Contains(d.Reason, c.why)):
			t.Errorf("%s: %+v, want %s with %q", name, d, c.value, c.why)
		}
		if p.Distributed.SyncBatchnorm != (c.value == "on") {
			t.Errorf("%s: plan's sync_batchnorm %v", name, p.Distributed.SyncBatchnorm)
		}
		if warned := strings.Contains(fmt.Sprint(ds), "the model has no batchnorm"); warned != (c.norm == "layernorm") {
			t.Errorf("%s: warned %v: %v", name, warned, ds)
		}
	}
}

// TestFewerNodesWarning: pills' step of 256 on 4 nodes of 8 H100s at
// 100 Gb/s spends most of its time in the all-reduce between nodes, and
// 1 node would train faster: the plan warns, naming it and the figures.
// With a port a GPU (8 × 400 Gb/s) more nodes pay, and there is no
// warning; nor on one node.
func TestFewerNodesWarning(t *testing.T) {
	prog, _ := load(t, "../examples/pills.pipe", "pills.pipe")
	warned := func(nodes int, net float64) string {
		p, ds := Plan(prog, testCosts, WithHost(testHost), WithDevice("h100-80gb"), WithDevices(8, nodes), WithNetwork(net))
		if p == nil || p.EffectiveBatch != 256 {
			t.Fatalf("%d nodes: %v", nodes, ds)
		}
		for _, d := range ds {
			if d.Code == CodeFewerNodes {
				return d.Summary + ": " + d.Detail
			}
		}
		return ""
	}
	w := warned(4, DefaultNetwork)
	for _, want := range []string{"1 node would train faster than 4", "on 4 nodes and", "on 1:", "--nnodes 1", "64.0 MiB a node over 100 Gb/s"} {
		if !strings.Contains(w, want) {
			t.Errorf("4 nodes at 100 Gb/s: no %q in %q", want, w)
		}
	}
	if w := warned(4, 8*400e9/8); w != "" {
		t.Errorf("4 nodes at 3.2 Tb/s: %s", w)
	}
	if w := warned(1, DefaultNetwork); w != "" {
		t.Errorf("1 node: %s", w)
	}
}
