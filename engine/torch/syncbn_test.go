package torch

import (
	"math"
	"strings"
	"testing"

	"pipe/internal/progtest"
	"pipe/run"
)

// syncBNPipe is a small convolutional model with a batchnorm over
// channels of 6×6 maps and one over dense features.
const syncBNPipe = `pipeline syncbn
seed 3
source blobs synthetic { samples 64  shape [2, 6, 6]  classes 4  seed 5 }
model net {
  input [2, 6, 6]
  conv 4 k3 pad1 bias false -> batchnorm -> relu
  flatten -> dense 16 bias false -> batchnorm -> relu -> dense 4
}
train { epochs 1  batch 8  optimizer adam lr 0.01  loss cross_entropy }
`

// TestSyncBatchnormEqualsOneProcess: two ranks of batch 4 with
// sync_batchnorm (the worker's gloo all-reduce on the CPU) train as one
// process on the batches of 8 does, step loss for step loss within 1e-5,
// and end with the same running statistics; without it, each rank's
// batchnorm normalises over its own 4 samples and the losses differ.
func TestSyncBatchnormEqualsOneProcess(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "syncbn.pipe", []byte(syncBNPipe))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Threads = 1
	one := cfg
	one.Batch = 8
	synced := cfg
	synced.Batch = 4
	synced.Engine.WorldSize = 2
	synced.Engine.SyncBatchnorm = true
	apart := synced
	apart.Engine.SyncBatchnorm = false
	single := buildTorch(t, g, one, Backend{Python: py})
	sync := buildTorch(t, g, synced, Backend{Python: py, NProcPerNode: 2, MasterPort: freePort(t)})
	own := buildTorch(t, g, apart, Backend{Python: py, NProcPerNode: 2, MasterPort: freePort(t)})
	if got := sync.Applied()["sync_batchnorm"]; !strings.Contains(got, "2 layers, gloo") {
		t.Errorf("applied sync_batchnorm %q", got)
	}
	if got, ok := own.Applied()["sync_batchnorm"]; ok {
		t.Errorf("sync_batchnorm applied without the plan's asking: %q", got)
	}
	var apartWorst float64
	for step := range 8 {
		b := randomBatch(g, cfg.Loss.Kind, 8, uint64(200+step))
		var losses [3]float64
		for i, m := range []*model{single, sync, own} {
			if err := m.QueueTrain(b, 1, true, true); err != nil {
				t.Fatal(err)
			}
			if err := m.QueueStep(0, 1e-2); err != nil {
				t.Fatal(err)
			}
			r, err := m.Results(true)
			if err != nil {
				t.Fatal(err)
			}
			losses[i] = r[0].Losses[0]
		}
		if d := math.Abs(losses[1]-losses[0]) / losses[0]; d > 1e-5 {
			t.Errorf("step %d: loss %.7g in one process of 8, %.7g over two synced ranks of 4", step+1, losses[0], losses[1])
		}
		apartWorst = math.Max(apartWorst, math.Abs(losses[2]-losses[0])/losses[0])
	}
	if apartWorst < 1e-3 {
		t.Errorf("without sync_batchnorm the losses are within %.2g of one process's: the test cannot tell", apartWorst)
	}
	t.Logf("without sync_batchnorm the losses differ from one process's by up to %.2g", apartWorst)
	want := single.State()
	got := sync.State()
	for _, name := range []string{"batchnorm1.running_mean", "batchnorm1.running_var", "batchnorm2.running_var"} {
		w, s := want.Lookup(name), got.Lookup(name)
		if w == nil || s == nil {
			t.Fatalf("no %s in the state", name)
		}
		for i := range w.Data {
			if d := math.Abs(float64(w.Data[i] - s.Data[i])); d > 1e-5*math.Max(1, math.Abs(float64(w.Data[i]))) {
				t.Errorf("%s[%d]: %g in one process, %g synced", name, i, w.Data[i], s.Data[i])
				break
			}
		}
	}
}
