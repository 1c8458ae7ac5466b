package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pipe/diag"
)

// deep is a model of many repeated blocks, for the planner's scaling:
// an MLP of dense -> relu pairs or a plain conv net, on the CPU executor
// or on a GPU, with room to spare or on a device so small that the batch
// and the checkpoint segments are solved together.
type deep struct {
	name  string
	body  string // one repeated block
	nodes int    // graph nodes a block adds
	input string
	head  string
	// device is a device block with a %d for its memory in MiB, or ""
	// for the host's CPU; its memory is fixed MiB plus perNode KiB a
	// node, so the budget binds alike at every depth.
	device         string
	fixed, perNode int
	batch          string
}

var deepModels = []deep{
	{name: "mlp/cpu", body: "dense 64 -> relu -> dense 64 -> relu", nodes: 4, input: "[64]", head: "dense 10", batch: "32"},
	{name: "mlp/cpu-tight", body: "dense 64 -> relu -> dense 64 -> relu", nodes: 4, input: "[64]", head: "dense 10", batch: "auto",
		device: "device tiny { kind cpu  memory %dMiB  bandwidth 50GB/s  fp32 1TFLOPS }", fixed: 1270, perNode: 78},
	{name: "mlp/gpu-tight", body: "dense 64 -> relu -> dense 64 -> relu", nodes: 4, input: "[64]", head: "dense 10", batch: "auto",
		device: "device tiny { memory %dMiB  bandwidth 500GB/s  fp32 10TFLOPS }", perNode: 41},
	{name: "conv/cpu", body: "conv 8 k3 pad1 -> batchnorm -> relu -> conv 8 k3 pad1", nodes: 4, input: "[8, 16, 16]", head: "gap -> dense 10", batch: "32"},
	{name: "conv/gpu-tight", body: "conv 8 k3 pad1 -> batchnorm -> relu -> conv 8 k3 pad1", nodes: 4, input: "[8, 16, 16]", head: "gap -> dense 10", batch: "auto",
		device: "device tiny { memory %dMiB  bandwidth 500GB/s  fp32 10TFLOPS }", perNode: 26},
}

// source writes d with about n graph nodes.
func (d deep) source(n int) string {
	var b strings.Builder
	b.WriteString("pipeline deep\n")
	if d.device != "" {
		b.WriteString("device tiny\n")
		fmt.Fprintf(&b, d.device+"\n", d.fixed+n*d.perNode/1024)
	}
	fmt.Fprintf(&b, "source data synthetic { samples 64  shape %s  classes 10 }\n", d.input)
	fmt.Fprintf(&b, "model m {\n  input %s\n  %d * (%s)\n  %s\n}\n", d.input, max(1, n/d.nodes), d.body, d.head)
	fmt.Fprintf(&b, "train { epochs 1  batch %s  loss cross_entropy  checkpoint auto }\n", d.batch)
	return b.String()
}

func benchmarkDeep(b *testing.B, n int) {
	for _, d := range deepModels {
		src := []byte(d.source(n))
		prog := check(b, "deep.pipe", src)
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p, ds := Plan(prog, testCosts, WithHost(testHost), WithSource(src)); p == nil || len(p.Layers) < n {
					b.Fatalf("no plan of %d layers:\n%v", n, ds)
				}
			}
		})
	}
}

// BenchmarkPlan20000Layers plans models of about 20,000 graph nodes
// (deepModels), the size at which a super-linear planner stalls `pipe
// plan` and the language server.
func BenchmarkPlan20000Layers(b *testing.B) { benchmarkDeep(b, 20000) }

// BenchmarkPlan2000Layers is the same models a tenth as deep, so the two
// benchmarks side by side show how planning scales.
func BenchmarkPlan2000Layers(b *testing.B) { benchmarkDeep(b, 2000) }

// TestDeepModelsPlan keeps the benchmark's models honest at a size the
// tests can afford: each plans, and each tight device needs segments.
func TestDeepModelsPlan(t *testing.T) {
	for _, d := range deepModels {
		src := d.source(200)
		p, ds := planSrc(t, src, fitOnly())
		if ds.HasErrors() || p == nil || !p.Fits {
			t.Fatalf("%s:\n%v", d.name, ds)
		}
		if tight := d.device != ""; tight != (len(p.Checkpoint.Segments) > 0) {
			t.Errorf("%s: %d checkpoint segments at batch %d", d.name, len(p.Checkpoint.Segments), p.BatchSize)
		}
	}
}

// planWork plans src and returns the checkpoint programme's work
// (chain.work: nodes walked and transitions tried, over every pass and
// every budget the batch search asked about) and the graph's nodes.
func planWork(t *testing.T, src string) (work int64, nodes int) {
	t.Helper()
	prog := check(t, "deep.pipe", []byte(src))
	var cfg config
	WithHost(testHost)(&cfg)
	testCosts(&cfg)
	pl := newPlanner(prog, cfg, testHost)
	pl.run()
	if pl.cost == nil || pl.plan == nil || pl.diags.HasErrors() {
		t.Fatalf("no plan:\n%v", pl.diags)
	}
	return pl.cost.ch.work, len(pl.graph.Nodes)
}

// TestPlanWorkGrowsLinearly plans each deep model at two depths, four
// times apart, and holds the checkpoint programme's work to linear growth:
// at most 6 times more for 4 times the nodes, where the exact programme's
// O(n·L·F) grew about 16 times (n², with L and F growing too). It counts
// steps, not seconds, so it does not depend on the machine.
func TestPlanWorkGrowsLinearly(t *testing.T) {
	if testing.Short() {
		t.Skip("plans models of 16,000 nodes")
	}
	for _, d := range deepModels {
		w1, n1 := planWork(t, d.source(4000))
		w2, n2 := planWork(t, d.source(16000))
		ratio := float64(w2) / float64(w1)
		t.Logf("%s: %d nodes %d steps, %d nodes %d steps: %.2f×", d.name, n1, w1, n2, w2, ratio)
		if ratio > 6 {
			t.Errorf("%s: the checkpoint programme did %d steps for %d nodes and %d for %d, %.1f times as many for %.1f times the nodes",
				d.name, w1, n1, w2, n2, ratio, float64(n2)/float64(n1))
		}
	}
}

// countdown is a context whose Err turns to context.Canceled once it has
// been asked n times: a cancellation at a chosen point of the planning,
// whatever the speed of the machine.
type countdown struct {
	context.Context
	n int
}

func (c *countdown) Err() error {
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

// TestPlanCancelledBeforehand: with a context already done, Plan returns
// no plan and one diagnostic saying it was cancelled.
func TestPlanCancelledBeforehand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, ds := planSrc(t, deepModels[2].source(20000), WithContext(ctx))
	if p != nil || len(ds) != 1 || ds[0].Code != CodeCancelled || ds[0].Severity != diag.Error {
		t.Fatalf("plan %v, diagnostics %v", p != nil, ds)
	}
}

// TestPlanCancelledInTheProgramme cancels the planning of a model whose
// checkpoints are solved once the checkpoint programme has polled its
// context a few times: Plan returns no plan, and the programme had done a
// small part of its work.
func TestPlanCancelledInTheProgramme(t *testing.T) {
	src := deepModels[2].source(4000)
	full, _ := planWork(t, src)
	prog := check(t, "deep.pipe", []byte(src))
	ctx := &countdown{Context: context.Background(), n: 6}
	var cfg config
	WithHost(testHost)(&cfg)
	testCosts(&cfg)
	WithContext(ctx)(&cfg)
	pl := newPlanner(prog, cfg, testHost)
	if err := pl.runUntilStopped(); !errors.Is(err, context.Canceled) {
		t.Fatalf("the planning was not stopped: %v", err)
	}
	if pl.cost == nil || pl.cost.ch.work == 0 || pl.cost.ch.work > full/10 {
		t.Fatalf("stopped after %d of the programme's %d steps", pl.cost.ch.work, full)
	}
	if p, ds := Plan(prog, testCosts, WithHost(testHost), WithContext(&countdown{Context: context.Background(), n: 6})); p != nil || ds[0].Code != CodeCancelled {
		t.Errorf("Plan returned a plan (%v) or %v", p != nil, ds)
	}
}
