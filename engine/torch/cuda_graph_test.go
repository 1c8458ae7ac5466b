package torch

import (
	"strings"
	"testing"

	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/run"
)

// graphNet has what a captured step must carry over from eager steps:
// batchnorm's running statistics, dropout's masks, a clipped gradient.
const graphNet = `pipeline graphnet
seed 2
source blobs synthetic { samples 64  shape [3, 8, 8]  classes 4  seed 5 }
model net {
  input [3, 8, 8]
  conv 8 k3 pad1 -> batchnorm -> relu -> dropout 0.25 -> flatten -> dense 4
}
train { epochs 1  batch 8  optimizer adam lr 0.01  loss cross_entropy }
`

// TestCUDAGraphDecision: the graph is on only for one device, a fused
// optimizer with a tensor learning rate (torch 2.2), no gan, no
// accumulation, no loss scaling and no checkpoint segments; off, the
// reason names the first obstacle.
func TestCUDAGraphDecision(t *testing.T) {
	ok := graphCase{torch: "2.11", optimizer: "adam", world: 1}
	cases := []struct {
		name string
		edit func(*graphCase)
		want string // "" for on
	}{
		{"plain", func(*graphCase) {}, ""},
		{"old torch", func(c *graphCase) { c.torch = "2.1.2" }, "learning rate as a device tensor from 2.2"},
		{"torch 1.13", func(c *graphCase) { c.torch = "1.13.1" }, "torch 1.13.1"},
		{"sgd before 2.3", func(c *graphCase) { c.torch, c.optimizer = "2.2.0", "sgd" }, "no fused kernel"},
		{"rmsprop", func(c *graphCase) { c.optimizer = "rmsprop" }, "no fused kernel"},
		{"ddp", func(c *graphCase) { c.world = 2 }, "2 devices"},
		{"gan", func(c *graphCase) { c.gan = true }, "gan mode"},
		{"accumulation", func(c *graphCase) { c.accumulate = true }, "accumulate"},
		{"fp16", func(c *graphCase) { c.gradScaler = true }, "GradScaler"},
		{"recompute", func(c *graphCase) { c.recompute = true }, "checkpoint segments"},
		{"kept off", func(c *graphCase) { c.off = "PIPE_TORCH_GRAPH=off" }, "PIPE_TORCH_GRAPH=off: the workers keep CUDA graphs off"},
	}
	for _, c := range cases {
		gc := ok
		c.edit(&gc)
		on, why := cudaGraph(gc)
		if on != (c.want == "") || !strings.Contains(why, c.want) {
			t.Errorf("%s: on %v, %q; want on %v with %q", c.name, on, why, c.want == "", c.want)
		}
	}
}

// TestCUDAGraphPlan: a GPU plan decides the graph with its reason and
// the last batch the training set leaves; a CPU plan has none.
func TestCUDAGraphPlan(t *testing.T) {
	_, p, _ := loadSrc(t, "graphnet.pipe", []byte(graphNet), planner.WithDevice("h100-80gb"), planner.WithTrainSamples(60, true))
	if !p.Engine.CUDAGraph {
		t.Fatalf("an H100 plan of one device has no CUDA graph: %+v", p.Engine)
	}
	d := decision(p, "cuda graph")
	if d == nil || d.Value != "on" || !strings.Contains(d.Reason, "leave a last batch of 4") {
		t.Errorf("the decision: %+v", d)
	}
	pooled, last := 0, 0
	for _, tm := range p.Memory.Terms {
		if tm.Pool == cost.PoolCUDAGraph {
			pooled++
		}
		if strings.HasPrefix(tm.Name, "eager last batch: saved activations") && tm.Bytes > 0 {
			last++
		}
	}
	if pooled < 4 || last == 0 {
		t.Errorf("%d terms in the graph's pool, %d of the eager last batch's activations", pooled, last)
	}
	_, fp16, _ := loadSrc(t, "graphnet.pipe", []byte(strings.Replace(graphNet, "seed 2\n", "seed 2\nprecision fp16\n", 1)), planner.WithDevice("v100-16gb"))
	if d := decision(fp16, "cuda graph"); fp16.Engine.CUDAGraph || d == nil || !strings.Contains(d.Reason, "GradScaler") {
		t.Errorf("fp16: graph %v, %+v", fp16.Engine.CUDAGraph, d)
	}
	_, off, _ := loadSrc(t, "graphnet.pipe", []byte(graphNet), planner.WithDevice("h100-80gb"), planner.WithTrainSamples(60, true),
		planner.WithHost(planner.HostInfo{}.WithEngineHost("torch", cost.Host{GraphsOff: "PIPE_TORCH_GRAPH=off"})))
	if d := decision(off, "cuda graph"); off.Engine.CUDAGraph || d == nil || d.Value != "off" || !strings.Contains(d.Reason, "PIPE_TORCH_GRAPH=off") {
		t.Errorf("the graph kept off by the host: graph %v, %+v", off.Engine.CUDAGraph, d)
	}
	for _, tm := range off.Memory.Terms {
		if tm.Pool != "" || strings.HasPrefix(tm.Name, "eager last batch") {
			t.Errorf("the graph kept off by the host, yet the plan prices %q (pool %q)", tm.Name, tm.Pool)
		}
	}
	_, cpu, _ := loadSrc(t, "graphnet.pipe", []byte(graphNet), planner.WithEngine("torch"))
	if cpu.Engine.CUDAGraph || decision(cpu, "cuda graph") != nil {
		t.Errorf("a CPU plan decides a CUDA graph")
	}
}

// TestGraphStepStatic: the captured step's arithmetic (static input
// buffers, the learning rate a tensor filled in place, the optimizer's
// capturable flag where this torch allows it on the CPU), run eagerly on
// the CPU, trains the losses of the plain step bit for bit, through the
// warm-up, the static steps, an eager last batch of another size and a
// change of learning rate; a capture that fails falls back to eager steps
// with the reason in the report.
func TestGraphStepStatic(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "graphnet.pipe", []byte(graphNet), planner.WithEngine("torch"))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch = 8
	plain := buildTorch(t, g, cfg, Backend{Python: py})
	cfg.Engine.CUDAGraph = true
	t.Setenv("PIPE_TORCH_FAKE_GRAPH", "static")
	static := buildTorch(t, g, cfg, Backend{Python: py})
	t.Setenv("PIPE_TORCH_FAKE_GRAPH", "fail")
	failed := buildTorch(t, g, cfg, Backend{Python: py})
	models := []*model{plain, static, failed}
	for s := uint64(1); s <= 9; s++ {
		n, lr := 8, 0.01/float64(s)
		if s == 7 {
			n = 5 // an epoch's last batch: eager beside the graph
		}
		b := randomBatch(g, cfg.Loss.Kind, n, s)
		var losses [3]float64
		for i, m := range models {
			if err := m.QueueTrain(b, 1, true, true); err != nil {
				t.Fatalf("step %d: %v", s, err)
			}
			if err := m.QueueStep(0.5, lr); err != nil {
				t.Fatal(err)
			}
			r, err := m.Results(true)
			if err != nil {
				t.Fatalf("step %d: %v", s, err)
			}
			losses[i] = r[len(r)-1].Losses[0]
		}
		if losses[1] != losses[0] || losses[2] != losses[0] {
			t.Errorf("step %d: loss %.17g plain, %.17g static, %.17g after a failed capture", s, losses[0], losses[1], losses[2])
		}
	}
	if got := static.Applied()["cuda_graph"]; !strings.HasPrefix(got, "static step on cpu") {
		t.Errorf("static: cuda_graph applied as %q", got)
	}
	if got := failed.Applied()["cuda_graph"]; !strings.Contains(got, "eager (capture failed: RuntimeError") {
		t.Errorf("failed: cuda_graph applied as %q", got)
	}
	if got := plain.Applied()["cuda_graph"]; got != "" {
		t.Errorf("plain: cuda_graph applied as %q", got)
	}
}

// decision is p's decision about what, nil when it has none.
func decision(p *plan.Plan, what string) *plan.Decision {
	for i := range p.Decisions {
		if p.Decisions[i].What == what {
			return &p.Decisions[i]
		}
	}
	return nil
}

// TestCUDAGraphWithinEager holds a graph's plan to the eager plan of the
// same step. With full batches only, the pool holds the step's transient
// tensors at the peak of their liveness and the general pool the rest, so
// the graph adds its static inputs and what packing the pool apart can
// waste: one part-filled 2 MiB block of small tensors and one part-filled
// 20 MiB segment of medium ones (the caching allocator's size classes).
// With an eager last batch, that batch's tensors and the captured step's
// are never allocated at once: allocated memory adds the graph's
// gradients, still allocated in its pool, not the eager step's tensors.
func TestCUDAGraphWithinEager(t *testing.T) {
	const mib = 1 << 20
	plans := func(samples int64) (eager, graph *plan.Plan) {
		opts := []planner.Option{planner.WithDevice("h100-80gb"), planner.WithTrainSamples(samples, true)}
		_, graph, _ = loadSrc(t, "graphnet.pipe", []byte(graphNet), opts...)
		_, eager, _ = loadSrc(t, "graphnet.pipe", []byte(graphNet), append(opts, planner.WithHost(planner.HostInfo{}.WithEngineHost("torch", cost.Host{GraphsOff: "test"})))...)
		if !graph.Engine.CUDAGraph || eager.Engine.CUDAGraph {
			t.Fatalf("graph %v and %v", graph.Engine.CUDAGraph, eager.Engine.CUDAGraph)
		}
		return eager, graph
	}
	bytesOf := func(p *plan.Plan, name string) int64 {
		for _, tm := range p.Memory.Terms {
			if tm.Name == name {
				return tm.Bytes
			}
		}
		t.Fatalf("no term %q", name)
		return 0
	}
	// raw is the peak phase's allocated bytes before the allocator's
	// 512-byte rounding, which the plan lists apart.
	raw := func(p *plan.Plan) int64 {
		ph, _ := p.Memory.Peak()
		return ph.Allocated - bytesOf(p, "allocator: 512-byte rounding")
	}
	eager, graph := plans(64) // batch 8: full batches only
	static := bytesOf(graph, "CUDA graph static inputs")
	if static <= 0 {
		t.Fatalf("static inputs %d", static)
	}
	if d := graph.Memory.Total - eager.Memory.Total; d > static+22*mib {
		t.Errorf("full batches: the graph's total is %d bytes above the eager plan's, past the static inputs' %d and 22 MiB of packing", d, static)
	}
	if d := raw(graph) - raw(eager); d > static {
		t.Errorf("full batches: the graph's allocated memory is %d bytes above the eager plan's, past the static inputs' %d", d, static)
	}
	eager, graph = plans(60) // a last batch of 4
	grads := bytesOf(graph, "eager last batch: the graph's gradients")
	if grads <= 0 || grads != bytesOf(graph, "gradients") {
		t.Fatalf("the graph's gradients beside the eager last batch: %d", grads)
	}
	if d := raw(graph) - raw(eager); d > static+grads {
		t.Errorf("a last batch of 4: the graph's allocated memory is %d bytes above the eager plan's, past the static inputs' %d and the graph's gradients' %d", d, static, grads)
	}
}
