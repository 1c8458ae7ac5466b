package torch

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pipe/dataset"
	"pipe/diag"
	"pipe/engine"
	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/run"
)

// resumable is a small classifier on synthetic data: two epochs of 24
// steps, a batchnorm and a hidden layer, no dropout.
const resumable = `pipeline resumable
seed 3
source blobs synthetic {
  samples 600
  shape   [12]
  classes 4
  seed    5
}
model net {
  input [12]
  dense 32 bias false -> batchnorm -> relu -> dense 4  // no bias before the batchnorm: it would learn from rounding noise alone
}
train { epochs 2  batch 25  optimizer adam lr 0.01  schedule cosine  loss cross_entropy  metrics [accuracy] }
evaluate { source blobs }
`

// runJob runs src through run.Run on the engine named, with the
// checkpoints in dir.
func runJob(t *testing.T, src, engine, dir string, py string, ctx context.Context, hooks run.Hooks, opts ...run.Option) (*run.Result, diag.Diagnostics) {
	t.Helper()
	prog, p, _ := loadSrc(t, "resumable.pipe", []byte(src), planner.WithEngine(engine))
	all := append([]run.Option{run.WithBackend(native.Backend{}), run.WithBackend(Backend{Python: py}),
		run.WithBase(dir), run.WithCheckpointDir(filepath.Join(dir, "ckpt")), run.WithThreads(1)}, opts...)
	return run.Run(ctx, p, progtest.Decoded(t, prog), hooks, all...)
}

func mustRunJob(t *testing.T, src, engine, dir, py string, opts ...run.Option) *run.Result {
	t.Helper()
	res, ds := runJob(t, src, engine, dir, py, context.Background(), run.Hooks{}, opts...)
	if ds.HasErrors() {
		t.Fatalf("%s run failed:\n%v", engine, ds)
	}
	return res
}

// TestCheckpointsCrossEngines: a run stopped after 10 steps on one engine
// resumes on the other and trains the same losses as an uninterrupted run
// on the first engine, both ways; evaluation after a resume works on
// either.
func TestCheckpointsCrossEngines(t *testing.T) {
	py := testPython(t)
	for _, c := range []struct{ first, then string }{{"native", "torch"}, {"torch", "native"}} {
		t.Run(c.first+" then "+c.then, func(t *testing.T) {
			whole := mustRunJob(t, resumable, c.first, t.TempDir(), py, run.WithMaxSteps(25))
			dir := t.TempDir()
			part := mustRunJob(t, resumable, c.first, dir, py, run.WithMaxSteps(10))
			if part.Status != run.StatusMaxSteps || part.Engine != c.first {
				t.Fatalf("first part: %s on %s", part.Status, part.Engine)
			}
			rest := mustRunJob(t, resumable, c.then, dir, py, run.WithResume(""), run.WithMaxSteps(25))
			if rest.ResumedFrom == nil || rest.ResumedFrom.Step != 10 || rest.Engine != c.then {
				t.Fatalf("resumed from %+v on %s", rest.ResumedFrom, rest.Engine)
			}
			if len(rest.StepLosses) != 25 || len(whole.StepLosses) != 25 {
				t.Fatalf("%d and %d losses", len(rest.StepLosses), len(whole.StepLosses))
			}
			for i := 10; i < 25; i++ {
				a, b := whole.StepLosses[i], rest.StepLosses[i]
				if d := math.Abs(a-b) / a; d > 1e-5 {
					t.Errorf("step %d: %.7g uninterrupted on %s, %.7g resumed on %s", i+1, a, c.first, b, c.then)
				}
			}
			// The engine that resumed evaluates the model it trained.
			if whole.Final == nil || rest.Final == nil {
				t.Fatal("no final evaluation")
			}
			va, vb := whole.Final.Loss, rest.Final.Loss
			if d := math.Abs(va-vb) / va; d > 1e-5 {
				t.Errorf("evaluation loss %.7g uninterrupted, %.7g resumed", va, vb)
			}
		})
	}
}

// TestInterruptAndResumeOnTorch: a cancelled run finishes its step,
// writes a checkpoint and stops; resumed, it reproduces the uninterrupted
// run's losses exactly (the same engine, the same threads).
func TestInterruptAndResumeOnTorch(t *testing.T) {
	py := testPython(t)
	whole := mustRunJob(t, resumable, "torch", t.TempDir(), py)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	hooks := run.Hooks{Step: func(s run.StepInfo) {
		if s.Step == 7 {
			cancel()
		}
	}}
	res, ds := runJob(t, resumable, "torch", dir, py, ctx, hooks)
	if ds.HasErrors() || res.Status != run.StatusInterrupted {
		t.Fatalf("%s\n%v", res.Status, ds)
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt", "last.ckpt")); err != nil {
		t.Fatal(err)
	}
	rest := mustRunJob(t, resumable, "torch", dir, py, run.WithResume(""))
	if rest.Status != run.StatusCompleted || len(rest.StepLosses) != len(whole.StepLosses) {
		t.Fatalf("%s, %d losses of %d", rest.Status, len(rest.StepLosses), len(whole.StepLosses))
	}
	for i := range whole.StepLosses {
		if whole.StepLosses[i] != rest.StepLosses[i] {
			t.Errorf("step %d: %v uninterrupted, %v resumed", i+1, whole.StepLosses[i], rest.StepLosses[i])
		}
	}
}

// workers lists the torch workers this process started.
func workers(t *testing.T) []int {
	t.Helper()
	me := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmtSscan(e.Name(), &pid); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		var ppid int
		if len(f) > 1 {
			fmtSscan(f[1], &ppid)
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if ppid == me && strings.Contains(string(cmd), PackageName) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestKilledWorker: a worker killed in the middle of training stops the
// run within seconds with an error that says so and shows the worker's
// last lines of stderr; the checkpoint written before is intact. The
// steps go 5 to a command, so that a command is in flight when step 30's
// progress comes back (the plan's unit here is the whole epoch).
func TestKilledWorker(t *testing.T) {
	py := testPython(t)
	dir := t.TempDir()
	killed := false
	hooks := run.Hooks{Step: func(s run.StepInfo) {
		if s.Step == 30 && !killed { // in the second epoch, after a checkpoint
			for _, pid := range workers(t) {
				killProcess(pid)
				killed = true
			}
		}
	}}
	start := time.Now()
	res, ds := runJobUnit(t, "torch", dir, py, 5, context.Background(), hooks)
	if !killed {
		t.Fatal("no worker found to kill")
	}
	if time.Since(start) > 60*time.Second {
		t.Errorf("the run took %v to notice", time.Since(start))
	}
	if !ds.HasErrors() || res.Status != run.StatusFailed {
		t.Fatalf("status %s, diagnostics:\n%v", res.Status, ds)
	}
	msg := ds.Error()
	if !strings.Contains(msg, "died") || !strings.Contains(msg, "signal: killed") {
		t.Errorf("the error does not say the worker died:\n%s", msg)
	}
	if !strings.Contains(msg, "last.ckpt") {
		t.Errorf("the error does not name the checkpoint kept:\n%s", msg)
	}
	if strings.Contains(msg, "learning rate") || !strings.Contains(msg, "as it is") {
		t.Errorf("the advice does not follow the cause (a killed worker):\n%s", msg)
	}
	// The checkpoint of the first epoch resumes.
	again := mustRunJob(t, resumable, "torch", dir, py, run.WithResume(""), run.WithMaxSteps(26))
	if again.ResumedFrom == nil || again.ResumedFrom.Step != 24 {
		t.Errorf("resumed from %+v", again.ResumedFrom)
	}
	if left := workers(t); len(left) > 0 {
		t.Errorf("workers left running: %v", left)
	}
}

// TestLaggedReadback: with the losses read back one step late (what a
// GPU plan asks for), a run trains the same losses as with each read at
// once, and a non-finite loss still stops it.
func TestLaggedReadback(t *testing.T) {
	py := testPython(t)
	prog, p, _ := loadSrc(t, "resumable.pipe", []byte(resumable), planner.WithEngine("torch"))
	runJobWith := func(readback string, opts ...run.Option) *run.Result {
		pp := *p
		pp.Engine.LossReadback = readback
		dir := t.TempDir()
		all := append([]run.Option{run.WithBackend(Backend{Python: py}), run.WithBase(dir),
			run.WithCheckpointDir(filepath.Join(dir, "ckpt")), run.WithThreads(1)}, opts...)
		res, ds := run.Run(context.Background(), &pp, progtest.Decoded(t, prog), run.Hooks{}, all...)
		if ds.HasErrors() {
			t.Fatalf("%s: %v", readback, ds)
		}
		return res
	}
	sync := runJobWith("sync", run.WithMaxSteps(30))
	lagged := runJobWith("lagged", run.WithMaxSteps(30))
	if len(sync.StepLosses) != 30 || len(lagged.StepLosses) != 30 {
		t.Fatalf("%d and %d losses", len(sync.StepLosses), len(lagged.StepLosses))
	}
	for i := range sync.StepLosses {
		if sync.StepLosses[i] != lagged.StepLosses[i] {
			t.Errorf("step %d: %v read at once, %v a step late", i+1, sync.StepLosses[i], lagged.StepLosses[i])
		}
	}
	if len(lagged.EpochResults) != 1 || lagged.EpochResults[0].TrainLoss != sync.EpochResults[0].TrainLoss {
		t.Errorf("epochs %+v and %+v", lagged.EpochResults, sync.EpochResults)
	}
}

// TestLaggedNonFinite: a non-finite loss read back late comes back as
// NaN in its step's result (which pipe run turns into its NonFiniteError),
// and the steps before it are intact.
func TestLaggedNonFinite(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadFile(t, "../../examples/fashion_mlp.pipe")
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads, cfg.Engine.LossReadback = 8, 1, "lagged"
	m := buildTorch(t, g, cfg, Backend{Python: py})
	good := randomBatch(g, "cross_entropy", 8, 1)
	bad := randomBatch(g, "cross_entropy", 8, 2)
	bad.X[3] = float32(math.NaN())
	for _, b := range []*dataset.Batch{good, good, bad} {
		if err := m.QueueTrain(b, 1, true, true); err != nil {
			t.Fatal(err)
		}
		if err := m.QueueStep(0, 1e-3); err != nil {
			t.Fatal(err)
		}
	}
	res, err := m.Results(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || math.IsNaN(res[0].Losses[0]) || math.IsNaN(res[1].Losses[0]) || !math.IsNaN(res[2].Losses[0]) {
		t.Errorf("results %v", res)
	}
}

// TestNonFiniteNamesTheCause: with each loss read at once (the CPU), a
// NaN input is reported as the input's, a NaN weight by its name, and
// neither changes the model.
func TestNonFiniteNamesTheCause(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadFile(t, "../../examples/fashion.pipe")
	for _, n := range g.Nodes {
		if n.Op == "dropout" {
			n.Args.P = 0
		}
	}
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads = 4, 1
	m := buildTorch(t, g, cfg, Backend{Python: py})
	before := m.State()
	bad := randomBatch(g, "cross_entropy", 4, 2)
	bad.X[7] = float32(math.Inf(1))
	_, err := m.TrainStep(bad, 1)
	var nf *engine.NonFiniteError
	if !errors.As(err, &nf) || !nf.Input {
		t.Fatalf("got %v, want the input named", err)
	}
	after := m.State()
	for _, x := range before.Tensors {
		y := after.Lookup(x.Name)
		for i := range x.Data {
			if x.Data[i] != y.Data[i] {
				t.Fatalf("%s changed", x.Name)
			}
		}
	}
	st := m.State()
	w := st.Lookup("dense1.weight")
	w.Data[0] = float32(math.NaN())
	if err := m.SetState(st); err != nil {
		t.Fatal(err)
	}
	_, err = m.TrainStep(randomBatch(g, "cross_entropy", 4, 3), 1)
	if !errors.As(err, &nf) || nf.Param != "dense1.weight" {
		t.Fatalf("got %v, want dense1.weight named", err)
	}
}

// smallConv is a conv model whose weights channels_last stores NHWC.
const smallConv = `pipeline smallconv
seed 2
source blobs synthetic { samples 64  shape [3, 8, 8]  classes 4  seed 5 }
model net {
  input [3, 8, 8]
  conv 8 k3 pad1 -> batchnorm -> relu -> conv 8 k3 pad1 -> relu -> flatten -> dense 4
}
train { epochs 1  batch 8  optimizer adam lr 0.01  loss cross_entropy }
`

// TestResumeChannelsLast: optimizer state restored into a channels_last
// model takes its parameters' strides (fused Adam on CUDA refuses any
// other layout), and the resumed model trains the losses of one that was
// never stopped.
func TestResumeChannelsLast(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "smallconv.pipe", []byte(smallConv), planner.WithEngine("torch"))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Engine.ChannelsLast = true
	step := func(m *model, seed uint64) float64 {
		t.Helper()
		b := randomBatch(g, cfg.Loss.Kind, 8, seed)
		if err := m.QueueTrain(b, 1, true, true); err != nil {
			t.Fatal(err)
		}
		if err := m.QueueStep(0, p.Optimizer.LR); err != nil {
			t.Fatal(err)
		}
		r, err := m.Results(true)
		if err != nil {
			t.Fatal(err)
		}
		return r[len(r)-1].Losses[0]
	}
	a := buildTorch(t, g, cfg, Backend{Python: py})
	if a.Applied()["channels_last"] != "on" {
		t.Fatalf("channels_last not applied: %v", a.Applied())
	}
	step(a, 1)
	step(a, 2)
	b := buildTorch(t, g, cfg, Backend{Python: py})
	if err := b.SetState(a.State()); err != nil {
		t.Fatalf("restoring Adam's state into channels_last weights: %v", err)
	}
	for s := uint64(3); s < 6; s++ {
		la, lb := step(a, s), step(b, s)
		if d := math.Abs(la-lb) / la; d > 1e-6 {
			t.Errorf("batch %d: loss %.8g uninterrupted, %.8g resumed", s, la, lb)
		}
	}
}

// runJobUnit is runJob with the plan's steps per command set to unit.
func runJobUnit(t *testing.T, eng, dir, py string, unit int64, ctx context.Context, hooks run.Hooks, opts ...run.Option) (*run.Result, diag.Diagnostics) {
	t.Helper()
	prog, p, _ := loadSrc(t, "resumable.pipe", []byte(resumable), planner.WithEngine(eng))
	p.StepsPerCommand = unit
	all := append([]run.Option{run.WithBackend(native.Backend{}), run.WithBackend(Backend{Python: py}),
		run.WithBase(dir), run.WithCheckpointDir(filepath.Join(dir, "ckpt")), run.WithThreads(1)}, opts...)
	return run.Run(ctx, p, progtest.Decoded(t, prog), hooks, all...)
}

// TestStepsPerCommandChangeNothing: on either engine, a run whose steps
// go 32 or 5 to a command trains the losses of one step a command bit for
// bit, evaluates the same model, and a run interrupted mid-epoch stops
// at a command's end and resumes to the same losses.
func TestStepsPerCommandChangeNothing(t *testing.T) {
	py := testPython(t)
	for _, eng := range []string{"native", "torch"} {
		t.Run(eng, func(t *testing.T) {
			job := func(unit int64, dir string, ctx context.Context, hooks run.Hooks, opts ...run.Option) *run.Result {
				t.Helper()
				res, ds := runJobUnit(t, eng, dir, py, unit, ctx, hooks, opts...)
				if ds.HasErrors() {
					t.Fatalf("%d steps a command:\n%v", unit, ds)
				}
				return res
			}
			same := func(what string, got, want *run.Result) {
				t.Helper()
				if len(got.StepLosses) != len(want.StepLosses) || len(want.StepLosses) != 48 {
					t.Fatalf("%s: %d losses, want %d", what, len(got.StepLosses), len(want.StepLosses))
				}
				for i := range want.StepLosses {
					if math.Float64bits(got.StepLosses[i]) != math.Float64bits(want.StepLosses[i]) {
						t.Fatalf("%s: step %d: loss %v, one step a command %v", what, i+1, got.StepLosses[i], want.StepLosses[i])
					}
				}
				if got.Final == nil || want.Final == nil || got.Final.Loss != want.Final.Loss {
					t.Errorf("%s: the final evaluations differ: %+v and %+v", what, got.Final, want.Final)
				}
			}
			bg := context.Background()
			want := job(1, t.TempDir(), bg, run.Hooks{})
			same("32 steps a command", job(32, t.TempDir(), bg, run.Hooks{}), want)

			dir := t.TempDir()
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			first := job(5, dir, ctx, run.Hooks{Step: func(s run.StepInfo) {
				if s.Step == 7 {
					cancel()
				}
			}})
			if first.Status != run.StatusInterrupted || first.Position.Step%5 != 0 || first.Position.Step >= 24 {
				t.Fatalf("interrupted at step 7 of commands of 5: %s at step %d", first.Status, first.Position.Step)
			}
			same("interrupted and resumed", job(5, dir, bg, run.Hooks{}, run.WithResume("")), want)
		})
	}
}

// TestStepPhasesTimed: under PIPE_TORCH_PHASES=1 every step's command
// says where its time went, one step a command or five, and the run's
// result sums them; without it, nothing is timed.
func TestStepPhasesTimed(t *testing.T) {
	py := testPython(t)
	bg := context.Background()
	res, ds := runJobUnit(t, "torch", t.TempDir(), py, 5, bg, run.Hooks{}, run.WithMaxSteps(10))
	if ds.HasErrors() || res.StepPhases != nil {
		t.Fatalf("phases %+v without %s\n%v", res.StepPhases, PhasesEnv, ds)
	}
	t.Setenv(PhasesEnv, "1")
	for _, unit := range []int64{1, 5} {
		res, ds := runJobUnit(t, "torch", t.TempDir(), py, unit, bg, run.Hooks{}, run.WithMaxSteps(10))
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		ph := res.StepPhases
		if ph == nil || ph.Steps != 10 || ph.DeviceSteps != 10 {
			t.Fatalf("%d a command: phases %+v, want 10 steps timed", unit, ph)
		}
		if !(ph.Device > 0 && ph.Copy > 0 && ph.Host > 0 && ph.Queue == 0) || ph.Copy+ph.Host+ph.Device > ph.Total*1.000001 {
			t.Errorf("%d a command: phases %+v: on the CPU the device's time is the compute, and the parts sum to the total", unit, ph)
		}
	}
}
