package torch

import (
	"bufio"
	"context"
	"errors"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"pipe/engine"
	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/planner"
	"pipe/run"
	"pipe/stdlib"
)

// TestOutOfMemoryIsReported: a forward pass that asks the allocator for
// more than the machine has (an upsampling to 1 TB) comes back as an
// *engine.OutOfMemoryError naming the layer and the pass, and the worker
// lives on.
func TestOutOfMemoryIsReported(t *testing.T) {
	py := testPython(t)
	src := `pipeline huge
source d synthetic { samples 4  shape [1, 8, 8] }
model m {
  input [1, 8, 8]
  upsample 65536 -> conv 1 k1 -> gap
}
train { epochs 1  batch 1  loss mse }
`
	// The planner refuses it, rightly; the engine is driven directly.
	f, _ := lang.Parse("huge.pipe", []byte(src))
	prog, ds := lang.Check(f, stdlib.Schema())
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	g, gds := stdlib.BuildGraph(prog.Models[0])
	if gds.HasErrors() {
		t.Fatal(gds)
	}
	cfg := engine.Config{Batch: 1, Loss: engine.Loss{Kind: "mse"}, Optimizer: engine.Optimizer{Kind: "sgd"}, Device: "cpu", Threads: 1}
	tm := buildTorch(t, g, cfg, Backend{Python: py})
	b := randomBatch(g, "mse", 1, 1)
	b.Y = nil
	_, err := tm.Eval(b, nil)
	var oom *engine.OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("got %v, want an out-of-memory error", err)
	}
	if oom.Phase != "evaluation" || oom.Node != "upsample1" || !strings.Contains(oom.Detail, "allocate") {
		t.Errorf("%+v", oom)
	}
	// The model still answers.
	small := randomBatch(g, "mse", 1, 2)
	small.Y = nil
	if _, err := tm.DeviceMemory(); err != nil {
		t.Errorf("after the failure: %v", err)
	}
}

// TestRecomputedSegments: the plan's checkpoint segments run through
// torch.utils.checkpoint: the loss and the update are those without
// recomputation (a recomputed batchnorm updates its running statistics
// once), and autograd keeps less.
func TestRecomputedSegments(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadFile(t, "../../examples/cells.pipe", planner.WithEngine("torch"), planner.WithBatch(2))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Engine.Autocast = "" // fp32: the two runs must agree to rounding
	plain := cfg
	plain.Checkpoint = nil
	// Two segments in the encoder, each holding a conv, batchnorm, relu.
	var segs []engine.Segment
	for _, n := range g.Nodes {
		if n.Op == "conv" && len(segs) < 2 && g.Nodes[n.ID+1].Op == "batchnorm" && g.Nodes[n.ID+2].Op == "relu" {
			segs = append(segs, engine.Segment{From: n.ID, To: n.ID + 2})
		}
	}
	if len(segs) != 2 {
		t.Fatalf("segments %v", segs)
	}
	cfg.Checkpoint = segs
	a := buildTorch(t, g, plain, Backend{Python: py})
	c := buildTorch(t, g, cfg, Backend{Python: py})
	b := randomBatch(g, cfg.Loss.Kind, 2, 3)
	sa, err := a.SavedBytes(b, false)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := c.SavedBytes(b, false)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Bytes["activations"] >= sa.Bytes["activations"] {
		t.Errorf("with the segments autograd keeps %d bytes, without %d", sc.Bytes["activations"], sa.Bytes["activations"])
	}
	before := a.State()
	for _, m := range []*model{a, c} {
		if err := m.QueueTrain(b, 1, true, true); err != nil {
			t.Fatal(err)
		}
		if err := m.QueueStep(0, p.Optimizer.LR); err != nil {
			t.Fatal(err)
		}
	}
	ra, err := a.Results(true)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.Results(true)
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(ra[0].Losses[0]-rc[0].Losses[0]) / ra[0].Losses[0]; d > 1e-6 {
		t.Errorf("loss %.8g without recomputation, %.8g with", ra[0].Losses[0], rc[0].Losses[0])
	}
	sa2, sc2 := a.State(), c.State()
	if med, mx, where := updateDiffs(t, before, sa2, sc2); med > 1e-5 || mx > 1e-3 {
		t.Errorf("updates differ: median %.2e, worst %.2e (%s)", med, mx, where)
	}
	for _, n := range g.Nodes {
		if n.Op == "batchnorm" {
			k := n.Name + ".num_batches_tracked"
			if sa2.Counters[k] != 1 || sc2.Counters[k] != 1 {
				t.Errorf("%s: %d and %d batches tracked", n.Name, sa2.Counters[k], sc2.Counters[k])
			}
		}
	}
}

// TestDeadRankStopsTheOthers: with two ranks, killing one ends the run
// within seconds: the survivor, which would wait in the all-reduce for
// ever, is stopped too, and the error says which rank died.
func TestDeadRankStopsTheOthers(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadFile(t, "../../examples/fashion_mlp.pipe")
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads, cfg.Engine.WorldSize = 8, 1, 2
	m := buildTorch(t, g, cfg, Backend{Python: py, NProcPerNode: 2, MasterPort: freePort(t)})
	pids := PIDs(m)
	if len(pids) != 2 {
		t.Fatalf("pids %v", pids)
	}
	b := randomBatch(g, "cross_entropy", 16, 1)
	if _, err := m.TrainStep(b, 1); err != nil {
		t.Fatal(err)
	}
	live, err := m.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	killProcess(pids[1])
	start := time.Now()
	for i := 0; i < 50 && err == nil; i++ {
		_, err = m.TrainStep(b, 1)
	}
	if err == nil || time.Since(start) > 30*time.Second {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	var we *WorkerError
	if !errors.As(err, &we) || we.Rank != 1 {
		t.Errorf("got %v, want rank 1's death", err)
	}
	assertPeaksAtExit(t, m, live)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && len(workers(t)) > 0 {
		time.Sleep(100 * time.Millisecond)
	}
	if left := workers(t); len(left) > 0 {
		t.Errorf("workers still running: %v", left)
	}
}

// assertPeaksAtExit: a failed model's workers, which cannot be asked, are
// measured at their exit: each at what it said before, but for the few
// pages a thread the kernel counts lazily (1% here), or not at all where
// the figure may be pipe's own (the worker never outgrew this process).
func assertPeaksAtExit(t *testing.T, m *model, live []engine.DeviceMemory) {
	t.Helper()
	dead, err := m.DeviceMemory()
	if err != nil || len(dead) != len(live) {
		t.Fatalf("after the failure: %v, %v", dead, err)
	}
	for i, d := range dead {
		outgrew := m.workers[i].pipePeak < live[i].MaxRSS*99/100
		ok := d.AtExit && d.Rank == live[i].Rank && d.Measured() == d.MaxRSS
		if d.MaxRSS > 0 {
			ok = ok && d.MaxRSS >= live[i].MaxRSS*99/100
		} else {
			ok = ok && !outgrew
		}
		if !ok {
			t.Errorf("rank %d at exit: %+v; it said %d bytes before, and pipe's peak was %d", live[i].Rank, d, live[i].MaxRSS, m.workers[i].pipePeak)
		}
	}
}

// TestInterruptEndsAWaitOnAStoppedRank: a rank of this machine stopped
// (SIGSTOP) mid-run leaves the other waiting in the all-reduce; the
// interrupt ends the wait at once, naming the stopped rank, and the model
// is unusable after, its workers measured at exit. Before, the wait went
// on to the collective's timeout, interrupted or not.
func TestInterruptEndsAWaitOnAStoppedRank(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadFile(t, "../../examples/fashion_mlp.pipe")
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads, cfg.Engine.WorldSize = 8, 1, 2
	cancel := make(chan struct{})
	cfg.Cancel = cancel
	m := buildTorch(t, g, cfg, Backend{Python: py, NProcPerNode: 2, MasterPort: freePort(t), CollectiveTimeout: time.Minute})
	pids := PIDs(m)
	b := randomBatch(g, "cross_entropy", 16, 1)
	if _, err := m.TrainStep(b, 1); err != nil {
		t.Fatal(err)
	}
	live, err := m.DeviceMemory()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pids[1], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pids[1], syscall.SIGCONT)
	time.AfterFunc(500*time.Millisecond, func() { close(cancel) })
	_, err = m.TrainStep(b, 1)
	var se *StalledError
	if !errors.As(err, &se) || !errors.Is(err, engine.ErrInterrupted) || !strings.Contains(se.Stopped, "rank 1 ") {
		t.Fatalf("got %v, want the interrupt to end the wait on the stopped rank 1", err)
	}
	t.Logf("%v", err)
	if _, err := m.TrainStep(b, 1); !errors.Is(err, engine.ErrInterrupted) {
		t.Errorf("the model is usable after it: %v", err)
	}
	assertPeaksAtExit(t, m, live)
}

// TestInterruptEndsAWaitOnAStalledNode: of two nodes of one worker each,
// node 1's worker is stopped; node 0, interrupted, cannot see the stopped
// rank, and gives up the all-reduce once it has waited its patience
// (interruptGrace, the steps before being fast). Before, the wait went on
// to the collective's timeout.
func TestInterruptEndsAWaitOnAStalledNode(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadFile(t, "../../examples/fashion_mlp.pipe")
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads, cfg.Engine.WorldSize = 8, 1, 2
	cancel := make(chan struct{})
	port := freePort(t)
	ms := make([]engine.Model, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for node := range 2 {
		c := cfg
		if node == 0 {
			c.Cancel = cancel
		}
		wg.Go(func() {
			ms[node], errs[node] = Backend{Python: py, NProcPerNode: 1, NNodes: 2, NodeRank: node, MasterPort: port, CollectiveTimeout: time.Minute}.Build(g, c)
		})
	}
	wg.Wait()
	for node, m := range ms {
		if m != nil {
			t.Cleanup(func() { m.Close() })
		}
		if errs[node] != nil {
			t.Fatalf("node %d: %v", node, errs[node])
		}
	}
	b := randomBatch(g, "cross_entropy", 8, 1)
	for range 3 {
		for node, m := range ms {
			wg.Go(func() { _, errs[node] = m.TrainStep(b, 1) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	w1 := PIDs(ms[1])[0]
	if err := syscall.Kill(w1, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(w1, syscall.SIGCONT)
	time.AfterFunc(500*time.Millisecond, func() { close(cancel) })
	_, err := ms[0].TrainStep(b, 1)
	var se *StalledError
	if !errors.As(err, &se) || !errors.Is(err, engine.ErrInterrupted) || se.Stopped != "" || !strings.Contains(err.Error(), "a peer rank is stalled") {
		t.Fatalf("got %v, want node 0 to give up the wait on a stalled peer", err)
	}
	if se.Waited < interruptGrace || !stepCommand(se.Command) {
		t.Errorf("gave up %s after %v, before its patience", se.Command, se.Waited)
	}
	t.Logf("%v", err)
}

// TestTwoNodes runs the same job as two nodes of one worker each (two
// run.Run calls standing for two machines, on loopback): node 1 trains
// its half of every batch and writes nothing; node 0 writes the
// checkpoint; the losses are those of one process with the whole batches.
// The model has no batchnorm, whose statistics are per device under DDP.
func TestTwoNodes(t *testing.T) {
	py := testPython(t)
	port := freePort(t)
	src := strings.Replace(strings.Replace(resumable, "dense 32 bias false -> batchnorm -> relu", "dense 32 -> relu", 1), "batch 25", "batch 20", 1)
	prog, p, _ := loadSrc(t, "nodes.pipe", []byte(src), planner.WithEngine("torch"), planner.WithDevices(1, 2), planner.WithBatch(10))
	if p.WorldSize() != 2 || p.EffectiveBatch != 20 {
		t.Fatalf("world %d, effective batch %d", p.WorldSize(), p.EffectiveBatch)
	}
	dirs := []string{t.TempDir(), t.TempDir()}
	res := make([]*run.Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for node := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := Backend{Python: py, NProcPerNode: 1, NNodes: 2, NodeRank: node, MasterPort: port}
			r, ds := run.Run(context.Background(), p, progtest.Decoded(t, prog), run.Hooks{},
				run.WithBackend(native.Backend{}), run.WithBackend(b), run.WithNodeRank(node), run.WithMaxSteps(12),
				run.WithBase(dirs[node]), run.WithCheckpointDir(filepath.Join(dirs[node], "ckpt")), run.WithThreads(1))
			res[node] = r
			if ds.HasErrors() {
				errs[node] = ds
			}
		}()
	}
	wg.Wait()
	for node, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", node, err)
		}
	}
	if res[0].Checkpoint == "" || res[1].Checkpoint != "" {
		t.Errorf("checkpoints: node 0 %q, node 1 %q", res[0].Checkpoint, res[1].Checkpoint)
	}
	if res[1].Final != nil {
		t.Error("node 1 evaluated")
	}
	one := mustRunJob(t, src, "torch", t.TempDir(), py, run.WithMaxSteps(12))
	if len(one.StepLosses) != 12 || len(res[0].StepLosses) != 12 {
		t.Fatalf("%d and %d losses", len(one.StepLosses), len(res[0].StepLosses))
	}
	for i := range one.StepLosses {
		// Each node reports the job's loss, over both nodes' samples.
		for node := range 2 {
			if d := math.Abs(res[node].StepLosses[i]-one.StepLosses[i]) / one.StepLosses[i]; d > 1e-5 {
				t.Errorf("step %d: %.7g on node %d, %.7g in one process", i+1, res[node].StepLosses[i], node, one.StepLosses[i])
			}
		}
	}
}

// TestOneNodeStoppedStopsBoth: of two nodes (two run.Run calls, as
// pipe processes under srun), only node 1 is interrupted (SLURM's SIGUSR1
// may reach one task first, or one alone). Both stop after the same step,
// node 0 writes the checkpoint, and neither waits for a step the other
// never takes.
func TestOneNodeStoppedStopsBoth(t *testing.T) {
	py := testPython(t)
	port := freePort(t)
	src := strings.Replace(resumable, "dense 32 bias false -> batchnorm -> relu", "dense 32 -> relu", 1)
	prog, p, _ := loadSrc(t, "nodes.pipe", []byte(src), planner.WithEngine("torch"), planner.WithDevices(1, 2), planner.WithBatch(10))
	dirs := []string{t.TempDir(), t.TempDir()}
	res := make([]*run.Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for node := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hooks := run.Hooks{}
			if node == 1 {
				hooks.Step = func(s run.StepInfo) {
					if s.Step == 5 {
						cancel()
					}
				}
			}
			b := Backend{Python: py, NProcPerNode: 1, NNodes: 2, NodeRank: node, MasterPort: port}
			r, ds := run.Run(ctx, p, progtest.Decoded(t, prog), hooks,
				run.WithBackend(native.Backend{}), run.WithBackend(b), run.WithNodeRank(node), run.WithMaxSteps(40),
				run.WithBase(dirs[node]), run.WithCheckpointDir(filepath.Join(dirs[node], "ckpt")), run.WithThreads(1))
			res[node] = r
			if ds.HasErrors() {
				errs[node] = ds
			}
		}()
	}
	wg.Wait()
	for node, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", node, err)
		}
	}
	for node, r := range res {
		if r.Status != run.StatusInterrupted {
			t.Errorf("node %d: %s after %d steps", node, r.Status, r.Position.Step)
		}
	}
	// Node 1 asks with step 6, the first after its cancel; all stop after it.
	if a, b := res[0].Position.Step, res[1].Position.Step; a != b || a != 6 {
		t.Errorf("node 0 stopped after step %d, node 1 after step %d; want both 6", a, b)
	}
	if res[0].Checkpoint == "" {
		t.Error("node 0 wrote no checkpoint")
	}
}

// lockedBuffer is a log's output written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMissingRankIsNamed: rank 0 of two nodes started alone says every
// few seconds whom it waits for and where, then ends at the rendezvous
// timeout with an error naming the rank that never came, not a
// traceback; interrupted instead, it stops waiting at once.
func TestMissingRankIsNamed(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "nodes.pipe", []byte(resumable), planner.WithEngine("torch"), planner.WithDevices(1, 2), planner.WithBatch(10))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	var logs lockedBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	b := Backend{Python: py, NProcPerNode: 1, NNodes: 2, NodeRank: 0, MasterPort: freePort(t), RendezvousTimeout: 7 * time.Second, Log: log}
	_, err := b.Build(g, cfg)
	if err == nil || !strings.Contains(err.Error(), "ranks 1 never joined") || strings.Contains(err.Error(), "Traceback") {
		t.Errorf("rank 0 alone: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "waiting at 127.0.0.1:") || !strings.Contains(out, "for rank(s) 1; present: 0") {
		t.Errorf("no progress while rank 1 was missing:\n%s", out)
	}
	cancel := make(chan struct{})
	cfg.Cancel = cancel
	b.MasterPort, b.RendezvousTimeout = freePort(t), 5*time.Minute
	time.AfterFunc(time.Second, func() { close(cancel) })
	start := time.Now()
	_, err = b.Build(g, cfg)
	if !errors.Is(err, engine.ErrInterrupted) || time.Since(start) > 60*time.Second {
		t.Errorf("interrupted after %v: %v", time.Since(start), err)
	}
}

// TestStalledRankIsReported: a rank frozen inside training (SIGSTOP)
// leaves the other waiting in the all-reduce: pipe says so while it
// waits, and the collective timeout ends the wait with an error instead
// of a hang.
func TestStalledRankIsReported(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadFile(t, "../../examples/fashion_mlp.pipe")
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads, cfg.Engine.WorldSize = 8, 1, 2
	defer func(d time.Duration) { stallReport = d }(stallReport)
	stallReport = time.Second
	var logs lockedBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	m := buildTorch(t, g, cfg, Backend{Python: py, NProcPerNode: 2, MasterPort: freePort(t), CollectiveTimeout: 6 * time.Second, Log: log})
	pids := PIDs(m)
	if len(pids) != 2 {
		t.Fatalf("pids %v", pids)
	}
	b := randomBatch(g, "cross_entropy", 16, 1)
	if _, err := m.TrainStep(b, 1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pids[1], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pids[1], syscall.SIGCONT)
	start := time.Now()
	_, err := m.TrainStep(b, 1)
	if err == nil || time.Since(start) > 120*time.Second {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	if out := logs.String(); !strings.Contains(out, "a peer rank may be stalled") {
		t.Errorf("nothing said while rank 0 waited:\n%s", out)
	}
	if msg := err.Error(); !strings.Contains(msg, "rank 1") || !strings.Contains(msg, "is stopped") || strings.Contains(msg, "Traceback") ||
		!errors.Is(err, engine.ErrWorkerLost) {
		t.Errorf("the error does not name the stalled rank plainly: %v", err)
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Second), err)
}

// TestDeadRankOfAnotherNodeIsNamed: of two nodes of one worker each (two
// models, as two pipe processes under a launcher), node 1's worker is
// killed. Node 0's error names rank 1 once, without gloo's traceback, and
// is a lost worker (resumed as is); before, it was gloo's "Connection
// reset by peer" with eight lines of traceback and no rank.
func TestDeadRankOfAnotherNodeIsNamed(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadFile(t, "../../examples/fashion_mlp.pipe")
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads, cfg.Engine.WorldSize = 8, 1, 2
	port := freePort(t)
	ms := make([]engine.Model, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for node := range 2 {
		wg.Go(func() {
			ms[node], errs[node] = Backend{Python: py, NProcPerNode: 1, NNodes: 2, NodeRank: node, MasterPort: port}.Build(g, cfg)
		})
	}
	wg.Wait()
	for node, m := range ms {
		if m != nil {
			t.Cleanup(func() { m.Close() })
		}
		if errs[node] != nil {
			t.Fatalf("node %d: %v", node, errs[node])
		}
	}
	b := randomBatch(g, "cross_entropy", 8, 1)
	for node, m := range ms {
		wg.Go(func() { _, errs[node] = m.TrainStep(b, 1) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	killProcess(PIDs(ms[1].(*model))[0])
	var err error
	for i := 0; i < 50 && err == nil; i++ {
		_, err = ms[0].TrainStep(b, 1)
	}
	if err == nil || !errors.Is(err, engine.ErrWorkerLost) {
		t.Fatalf("node 0 after rank 1 died: %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "rank 1 went away") || strings.Contains(msg, "Traceback") || strings.Count(msg, "\n") > 0 {
		t.Errorf("node 0's error does not name rank 1 on one line:\n%s", msg)
	}
}

// TestPeerLostSignsAreTheWorkers: the worker names the rank that went
// away on the same errors that errors.go takes for a peer's loss.
func TestPeerLostSignsAreTheWorkers(t *testing.T) {
	b, err := Package.ReadFile("pipe_torch/rendezvous.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range peerLostSigns {
		if !strings.Contains(string(b), strconv.Quote(s)) {
			t.Errorf("rendezvous.py's PEER_LOST lacks %q", s)
		}
	}
}

// TestNodesSayTheirRestartsWhenTheyMeet: two nodes whose launcher
// restarted one (LauncherRestarts 2) and not the other (0, as torchrun
// leaves a healthy node's ranks) meet at the build, and both models say
// the world's largest count, 2. Before, each rank's count named its keys
// in the store, and the two never met.
func TestNodesSayTheirRestartsWhenTheyMeet(t *testing.T) {
	meetTwoNodes(t, Backend{MasterPort: freePort(t)})
}

// TestNodesMeetAfreshUnderTheAgentStore: under torchrun's agent store
// (torch 2.x), which outlives a start, the store holds an earlier
// start's keys: an announcement of a store that is gone, its ranks'
// joins and counts (7). The nodes still meet, in a store of their own,
// and say their own world's count, 2.
func TestNodesMeetAfreshUnderTheAgentStore(t *testing.T) {
	py := testPython(t)
	port := freePort(t)
	agent := exec.Command(py, "-c", `import datetime, sys
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, True, datetime.timedelta(seconds=60), wait_for_workers=False)
s.set("pipe/store", sys.argv[2] + " stale")
s.set("pipe/restarts/0", "7")
s.set("pipe/restarts/1", "7")
s.add("pipe/joined", 2)
print("ready", flush=True)
sys.stdin.read()`, strconv.Itoa(port), strconv.Itoa(freePort(t)))
	in, err := agent.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer agent.Wait()
	defer in.Close() // the agent's store ends with its stdin
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the agent's store did not start: %q", line)
	}
	meetTwoNodes(t, Backend{MasterPort: port, AgentStore: true})
}

// meetTwoNodes builds a model on two nodes of b, node 1 restarted twice
// by its launcher and node 0 never, and wants both to say 2.
func meetTwoNodes(t *testing.T, b Backend) {
	t.Helper()
	py := testPython(t)
	src := strings.Replace(resumable, "dense 32 bias false -> batchnorm -> relu", "dense 32 -> relu", 1)
	prog, p, g := loadSrc(t, "nodes.pipe", []byte(src), planner.WithEngine("torch"), planner.WithDevices(1, 2), planner.WithBatch(10))
	var wg sync.WaitGroup
	var said [2]int
	var errs [2]error
	for node := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
			cfg.LauncherRestarts = 2 * node
			b := b
			b.Python, b.NProcPerNode, b.NNodes, b.NodeRank, b.RendezvousTimeout = py, 1, 2, node, time.Minute
			m, err := b.Build(g, cfg)
			if err != nil {
				errs[node] = err
				return
			}
			defer m.Close()
			if w := m.Capabilities().World; w != nil {
				said[node] = w.LauncherRestarts()
			} else {
				errs[node] = errors.New("no World facet")
			}
		}()
	}
	wg.Wait()
	for node := range 2 {
		if errs[node] != nil || said[node] != 2 {
			t.Errorf("node %d: world's restarts %d (%v), want 2", node, said[node], errs[node])
		}
	}
}
