package torch

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"pipe/dataset"
	"pipe/engine"
	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/stdlib"
)

// queueStep queues one optimizer step of b as pipe run does, without
// waiting for it (Results(false)).
func queueStep(t *testing.T, m *model, b *dataset.Batch, lr float64) ([]engine.StepResult, error) {
	return trainStep(t, m, b, lr, false)
}

// trainStep queues one optimizer step of b and takes Results(wait).
func trainStep(t *testing.T, m *model, b *dataset.Batch, lr float64, wait bool) ([]engine.StepResult, error) {
	t.Helper()
	if err := m.QueueTrain(b, 1, true, true); err != nil {
		t.Fatal(err)
	}
	if err := m.QueueStep(0, lr); err != nil {
		t.Fatal(err)
	}
	return m.Results(wait)
}

// smallConvTwice builds smallConv twice on the torch engine, the two
// models alike.
func smallConvTwice(t *testing.T) (a, b *model, p *plan.Plan, g *stdlib.Graph, cfg engine.Config) {
	t.Helper()
	py := testPython(t)
	prog, p, g := loadSrc(t, "smallconv.pipe", []byte(smallConv), planner.WithEngine("torch"))
	cfg = run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	return buildTorch(t, g, cfg, Backend{Python: py}), buildTorch(t, g, cfg, Backend{Python: py}), p, g, cfg
}

// TestQueueRunsAhead: pipe run sends a step before the one before it has
// replied, so the worker finds its next command waiting; the losses and
// the state are those of steps waited for one by one.
func TestQueueRunsAhead(t *testing.T) {
	ahead, waited, p, g, cfg := smallConvTwice(t)
	var got, want []float64
	for s := uint64(1); s <= 6; s++ {
		b := randomBatch(g, cfg.Loss.Kind, 8, s)
		res, err := queueStep(t, ahead, b, p.Optimizer.LR)
		if err != nil {
			t.Fatalf("step %d: %v", s, err)
		}
		if s > 1 && len(ahead.workers[0].outstanding) == 0 {
			t.Fatalf("step %d: Results(false) waited for the step just queued", s)
		}
		for _, r := range res {
			got = append(got, r.Losses...)
		}
		res, err = trainStep(t, waited, b, p.Optimizer.LR, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			want = append(want, r.Losses...)
		}
	}
	res, err := ahead.Results(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		got = append(got, r.Losses...)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("losses queued ahead %v, waited for %v", got, want)
	}
	if a, w := ahead.State(), waited.State(); !reflect.DeepEqual(a, w) {
		t.Error("the states differ after the same six steps")
	}
}

// TestStepQueuedBehindAFailureIsNotRun: a step fails (a NaN input) while
// the next is already in the worker's pipe; that one is not run, so the
// state is the one before the failure, and training goes on from there
// once pipe has read the failure.
func TestStepQueuedBehindAFailureIsNotRun(t *testing.T) {
	m, ref, p, g, cfg := smallConvTwice(t)
	lr := p.Optimizer.LR
	b1, b3 := randomBatch(g, cfg.Loss.Kind, 8, 1), randomBatch(g, cfg.Loss.Kind, 8, 3)
	bad := randomBatch(g, cfg.Loss.Kind, 8, 2)
	bad.X[5] = float32(math.NaN())

	if _, err := queueStep(t, m, b1, lr); err != nil {
		t.Fatal(err)
	}
	if _, err := queueStep(t, m, bad, lr); err != nil {
		t.Fatalf("the failure came back before the step behind it was queued: %v", err)
	}
	_, err := queueStep(t, m, b3, lr) // b3 waits in the pipe behind the failure
	var nf *engine.NonFiniteError
	if !errors.As(err, &nf) {
		t.Fatalf("got %v, want the NaN input's failure", err)
	}
	if _, err := queueStep(t, ref, b1, lr); err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Results(true); err != nil {
		t.Fatal(err)
	}
	if got, want := m.State(), ref.State(); !reflect.DeepEqual(got.Tensors, want.Tensors) {
		t.Fatal("the step queued behind the failure changed the state")
	}
	// Training goes on: b3 again, on both, gives the same loss.
	var losses [2]float64
	for i, x := range []*model{m, ref} {
		res, err := trainStep(t, x, b3, lr, true)
		if err != nil || len(res) != 1 {
			t.Fatalf("after the failure: %v (%d steps)", err, len(res))
		}
		losses[i] = res[0].Losses[0]
	}
	if losses[0] != losses[1] {
		t.Errorf("the step after the failure: loss %.8g, want %.8g", losses[0], losses[1])
	}
}

// TestQueueStepsMatchesOneAtATime: K steps in one train_steps command
// give the losses and the state of the same steps sent one a command,
// learning rates changing from step to step; the command is one message
// each way, and Results(false) leaves it in flight.
func TestQueueStepsMatchesOneAtATime(t *testing.T) {
	for _, readback := range []string{"sync", "lagged"} {
		t.Run(readback, func(t *testing.T) { queueStepsMatch(t, readback) })
	}
}

// queueStepsMatch is TestQueueStepsMatchesOneAtATime with the losses read
// back as readback says (lagged: a command's come with the next one's
// reply).
func queueStepsMatch(t *testing.T, readback string) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "smallconv.pipe", []byte(smallConv), planner.WithEngine("torch"))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Engine.LossReadback = readback
	multi, single := buildTorch(t, g, cfg, Backend{Python: py}), buildTorch(t, g, cfg, Backend{Python: py})
	const k, commands = 8, 3
	var got, want []float64
	for c := range commands {
		var bs []*dataset.Batch
		var lrs []float64
		for i := range k {
			s := uint64(c*k + i + 1)
			bs = append(bs, randomBatch(g, cfg.Loss.Kind, 8, s))
			lrs = append(lrs, p.Optimizer.LR*float64(1+s%3))
		}
		before := len(multi.workers[0].outstanding)
		if err := multi.QueueSteps(bs, lrs, 0.5); err != nil {
			t.Fatal(err)
		}
		if n := len(multi.workers[0].outstanding); n != before+1 {
			t.Fatalf("command %d: QueueSteps sent %d commands, want 1", c, n-before)
		}
		res, err := multi.Results(false)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(multi.workers[0].outstanding); n != 1 {
			t.Fatalf("command %d: %d commands in flight after Results(false), want the one just sent", c, n)
		}
		if c > 0 && readback == "sync" && len(res) != k {
			t.Fatalf("command %d: %d steps back, want the command before's %d", c, len(res), k)
		}
		for _, r := range res {
			got = append(got, r.Losses...)
		}
		for i, b := range bs {
			if err := single.QueueTrain(b, 1, true, true); err != nil {
				t.Fatal(err)
			}
			if err := single.QueueStep(0.5, lrs[i]); err != nil {
				t.Fatal(err)
			}
			res, err := single.Results(true)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				want = append(want, r.Losses...)
			}
		}
	}
	res, err := multi.Results(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		got = append(got, r.Losses...)
	}
	if len(want) != k*commands || !reflect.DeepEqual(got, want) {
		t.Errorf("losses of train_steps %v, of one step a command %v", got, want)
	}
	if a, w := multi.State(), single.State(); !reflect.DeepEqual(a, w) {
		t.Error("the states differ after the same steps")
	}
}

// TestQueueStepsStopsAtAFailure: a NaN input in the third of five steps
// of one command fails it there: the two steps before come back, the
// failure names step 2, and the state is that of the two steps alone.
func TestQueueStepsStopsAtAFailure(t *testing.T) {
	m, ref, p, g, cfg := smallConvTwice(t)
	lr := p.Optimizer.LR
	var bs []*dataset.Batch
	var lrs []float64
	for s := uint64(1); s <= 5; s++ {
		bs = append(bs, randomBatch(g, cfg.Loss.Kind, 8, s))
		lrs = append(lrs, lr)
	}
	bs[2].X[3] = float32(math.NaN())
	if err := m.QueueSteps(bs, lrs, 0); err != nil {
		t.Fatal(err)
	}
	res, err := m.Results(true)
	var nf *engine.NonFiniteError
	if !errors.As(err, &nf) || nf.Step != 2 {
		t.Fatalf("got %v, want the NaN input's failure at step 2", err)
	}
	if len(res) != 2 {
		t.Fatalf("%d steps came back before the failure, want 2", len(res))
	}
	for _, b := range bs[:2] {
		if _, err := trainStep(t, ref, b, lr, true); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := m.State(), ref.State(); !reflect.DeepEqual(got.Tensors, want.Tensors) {
		t.Fatal("the steps after the failure changed the state")
	}
}

// TestGCFrozenAfterTheFirstStep: the worker freezes Python's collector
// once a step has been taken, and says so.
func TestGCFrozenAfterTheFirstStep(t *testing.T) {
	m, _, p, g, cfg := smallConvTwice(t)
	if _, ok := m.Applied()["gc"]; ok {
		t.Fatal("gc frozen before any step")
	}
	for s := uint64(1); s <= 2; s++ {
		if _, err := trainStep(t, m, randomBatch(g, cfg.Loss.Kind, 8, s), p.Optimizer.LR, true); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Applied()["gc"]; !strings.HasPrefix(got, "frozen after step 1") {
		t.Errorf("applied gc %q, want frozen after step 1", got)
	}
}
