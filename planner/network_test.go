package planner

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestAllReduceTime: a data-parallel plan's step time gains the
// all-reduce, its bytes over the link it crosses: NVLink on one machine
// of GPUs, the network between machines, ten times longer at a tenth of
// the bandwidth; one device has none.
func TestAllReduceTime(t *testing.T) {
	one := gpuPlan(t, "../examples/pills.pipe", WithBatch(32))
	if one.StepTime.AllReduceSeconds != 0 || one.StepTime.Network != "" {
		t.Errorf("one device: %+v", one.StepTime)
	}
	local := gpuPlan(t, "../examples/pills.pipe", WithBatch(32), WithDevices(8, 1))
	nodes := gpuPlan(t, "../examples/pills.pipe", WithBatch(32), WithDevices(8, 4))
	slow := gpuPlan(t, "../examples/pills.pipe", WithBatch(32), WithDevices(8, 4), WithNetwork(DefaultNetwork/10))
	if local.StepTime.Network != "NVLink" || local.StepTime.NetworkBandwidth != NVLinkBandwidth {
		t.Errorf("one machine: %q at %g B/s", local.StepTime.Network, local.StepTime.NetworkBandwidth)
	}
	if nodes.StepTime.Network != "network" || nodes.StepTime.NetworkBandwidth != DefaultNetwork {
		t.Errorf("four machines: %q at %g B/s", nodes.StepTime.Network, nodes.StepTime.NetworkBandwidth)
	}
	want := float64(nodes.Distributed.AllReduceBytes) / DefaultNetwork
	if got := nodes.StepTime.AllReduceSeconds; math.Abs(got-want) > 1e-3*want {
		t.Errorf("all-reduce %g s, want %g (%d bytes at 100 Gb/s)", got, want, nodes.Distributed.AllReduceBytes)
	}
	if r := slow.StepTime.AllReduceSeconds / nodes.StepTime.AllReduceSeconds; math.Abs(r-10) > 0.01 {
		t.Errorf("a tenth of the bandwidth: %g times the all-reduce", r)
	}
	base := local.StepTime.StepSeconds - local.StepTime.AllReduceSeconds
	if d := nodes.StepTime.StepSeconds - base; math.Abs(d-nodes.StepTime.AllReduceSeconds) > 1e-3*nodes.StepTime.StepSeconds {
		t.Errorf("step %g s on 4 machines, %g s on one less its all-reduce: the difference is not the all-reduce's %g s", nodes.StepTime.StepSeconds, base, nodes.StepTime.AllReduceSeconds)
	}
	var why string
	for _, d := range nodes.Decisions {
		if d.What == "step time" {
			why = d.Reason
		}
	}
	if !strings.Contains(why, "all-reduce") || !strings.Contains(why, "100 Gb/s network") || !strings.Contains(why, "for the job of 32") {
		t.Errorf("the step time's reason: %s", why)
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
