package torch

import (
	"math"
	"net"
	"strings"
	"testing"

	"pipe/run"
)

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestDataParallelEqualsOneProcess trains fashion_mlp for 10 steps with
// two workers (gloo, DistributedDataParallel), each on its half of every
// batch of 16, and once in one worker on the whole batches: the two ranks
// end with the same parameters, and those of the single worker, within
// 1e-5.
func TestDataParallelEqualsOneProcess(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadFile(t, "../../examples/fashion_mlp.pipe")
	cfg := run.ConfigFromPlan(p, decoded(t, prog))
	cfg.Threads = 1
	one := cfg
	one.Batch = 16
	two := cfg
	two.Batch = 8
	two.Engine.WorldSize = 2
	single := buildTorch(t, g, one, Backend{Python: py})
	ddp := buildTorch(t, g, two, Backend{Python: py, NProcPerNode: 2, MasterPort: freePort(t)})
	if got := ddp.Applied()["process_group"]; !strings.Contains(got, "gloo") {
		t.Errorf("process group %q", got)
	}
	for step := range 10 {
		b := randomBatch(g, cfg.Loss.Kind, 16, uint64(100+step))
		for _, m := range []*model{single, ddp} {
			if err := m.QueueTrain(b, 1, true, true); err != nil {
				t.Fatal(err)
			}
			if err := m.QueueStep(0, 1e-3); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := single.Results(true)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := ddp.Results(true)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(rs[0].Losses[0]-rd[0].Losses[0]) / rs[0].Losses[0]; d > 1e-5 {
			t.Errorf("step %d: loss %.7g in one process, %.7g over two ranks", step+1, rs[0].Losses[0], rd[0].Losses[0])
		}
	}
	want := single.State()
	for k := range ddp.workers {
		resp, err := ddp.callK(k, getStateRequest{Layout: ddp.layout})
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeReply[stateReply](resp)
		if err != nil {
			t.Fatal(err)
		}
		reg := ddp.ws[k].st
		var worst float64
		for _, e := range ddp.layout {
			if strings.HasPrefix(e.Name, "optimizer.") {
				continue
			}
			w := want.Lookup(e.Name)
			got := reg.floats(e.Offset, e.Count)
			for i, v := range w.Data {
				worst = math.Max(worst, math.Abs(float64(got[i]-v)))
			}
		}
		if worst > 1e-5 {
			t.Errorf("rank %d: parameters differ from one process's by up to %.2e", k, worst)
		}
		if r.Counters["optimizer.step"] != 10 {
			t.Errorf("rank %d: %d optimizer steps", k, r.Counters["optimizer.step"])
		}
		t.Logf("rank %d: largest parameter difference from one process %.2e", k, worst)
	}
	// The plain loop runs on rank 0 alone, which DDP would leave waiting
	// for the others: it is refused, not hung.
	if _, err := TimePlain(ddp, randomBatch(g, cfg.Loss.Kind, 8, 1), 1e-3, 1, 1); err == nil || !strings.Contains(err.Error(), "one process") {
		t.Errorf("the plain loop over two ranks: %v", err)
	}
}
