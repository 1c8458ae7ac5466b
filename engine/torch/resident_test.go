package torch

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/dataset/samples"
	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/run"
)

// residentSrc is a small conv net on an idx source with a split and
// standard normalisation (statistics of the training part), written by
// writeIDX: the loader's table is not x/255.
const residentSrc = `pipeline kept
seed 4
source train idx { images "img.gz"  labels "lab"  normalize standard  split 0.8 seed 2 }
model net {
  input [1, 8, 8]
  conv 4 k3 pad1 -> batchnorm -> relu -> maxpool 2 -> flatten -> dense 3
}
train { epochs 2  batch 10  optimizer adam lr 0.01  schedule cosine  loss cross_entropy  metrics [accuracy] }
evaluate { source train }
`

// writeIDX writes n images of 8×8 bytes and their labels (3 classes, the
// class drawn into the picture) in dir.
func writeIDX(t *testing.T, dir string, n int) {
	t.Helper()
	idx := func(dims []int, data []byte, gz bool) []byte {
		var b bytes.Buffer
		b.Write([]byte{0, 0, 0x08, byte(len(dims))})
		for _, d := range dims {
			binary.Write(&b, binary.BigEndian, uint32(d))
		}
		b.Write(data)
		if !gz {
			return b.Bytes()
		}
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(b.Bytes())
		w.Close()
		return z.Bytes()
	}
	pix, lab := make([]byte, n*64), make([]byte, n)
	for i := range n {
		lab[i] = byte(i % 3)
		for j := range 64 {
			pix[i*64+j] = byte((i*37 + j*11 + int(lab[i])*60*(j%3)) % 256)
		}
	}
	for name, data := range map[string][]byte{"img.gz": idx([]int{n, 8, 8}, pix, true), "lab": idx([]int{n}, lab, false)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDataOnDeviceChangesNothing: a torch run on the CPU whose plan keeps
// the training set in the worker (the device path: bytes sent once,
// batches of indices gathered and normalised there, WithDataOnDevice as
// the fake device) trains the losses of the run that reads every batch
// on the host bit for bit, one step a command and four, and evaluates
// the same model.
func TestDataOnDeviceChangesNothing(t *testing.T) {
	py := testPython(t)
	dir := t.TempDir()
	writeIDX(t, dir, 60)
	job := func(unit int64, opts ...planner.Option) *run.Result {
		t.Helper()
		prog, p, _ := loadSrc(t, "kept.pipe", []byte(residentSrc), append([]planner.Option{planner.WithEngine("torch")}, opts...)...)
		p.StepsPerCommand = unit
		out := t.TempDir()
		res, ds := run.Run(context.Background(), p, progtest.Decoded(t, prog), run.Hooks{},
			run.WithBackend(native.Backend{}), run.WithBackend(Backend{Python: py}), run.WithBase(dir),
			run.WithCheckpointDir(filepath.Join(out, "ckpt")), run.WithThreads(1))
		if ds.HasErrors() {
			t.Fatalf("%d steps a command:\n%v", unit, ds)
		}
		return res
	}
	kept := []planner.Option{planner.WithDeviceData(planner.DeviceData{Bytes: 60*64 + 60, What: "60 images"}), planner.WithDataOnDevice(true)}
	_, p, _ := loadSrc(t, "kept.pipe", []byte(residentSrc), append([]planner.Option{planner.WithEngine("torch")}, kept...)...)
	if d := p.DataOnDevice; d == nil || !d.On || p.Memory.DeviceData != 60*64+60 {
		t.Fatalf("the plan keeps no data on the device: %+v, %d bytes priced", d, p.Memory.DeviceData)
	}
	want := job(1)
	if want.SamplesRead != 2*48 {
		t.Fatalf("the host run read %d samples, want 96", want.SamplesRead)
	}
	for _, unit := range []int64{1, 4} {
		got := job(unit, kept...)
		if len(got.StepLosses) != len(want.StepLosses) || len(want.StepLosses) != 10 {
			t.Fatalf("%d a command: %d losses, the host's %d, want 10", unit, len(got.StepLosses), len(want.StepLosses))
		}
		for i := range want.StepLosses {
			if math.Float64bits(got.StepLosses[i]) != math.Float64bits(want.StepLosses[i]) {
				t.Fatalf("%d a command: step %d: loss %v with the data on the device, %v from the host", unit, i+1, got.StepLosses[i], want.StepLosses[i])
			}
		}
		if got.Final == nil || want.Final == nil || got.Final.Loss != want.Final.Loss {
			t.Errorf("%d a command: the final evaluations differ: %+v and %+v", unit, got.Final, want.Final)
		}
	}
}

// TestKeepRefusesWhatDoesNotFit: a training set whose samples are not the
// model's input is refused with the reason, and a batch of indices
// without a kept set is an error, not a step on nothing.
func TestKeepRefusesWhatDoesNotFit(t *testing.T) {
	py := testPython(t)
	prog, p, g := loadSrc(t, "kept.pipe", []byte(residentSrc), planner.WithEngine("torch"))
	m := buildTorch(t, g, run.ConfigFromPlan(p, progtest.Decoded(t, prog)), Backend{Python: py})
	defer m.Close()
	bad := &samples.Resident{X: make([]byte, 20), Per: 10, Labels: make([]byte, 2)}
	if err := m.Capabilities().Resident.Keep(bad); err == nil || !strings.Contains(err.Error(), "10 bytes each") {
		t.Fatalf("Keep of 10-byte samples for an 8×8 input: %v", err)
	}
	b := &samples.Batch{N: 2, X: []float32{}, Y: []float32{}, Indices: []int{0, 1}}
	if _, err := m.TrainStep(b, 1); err == nil || !strings.Contains(err.Error(), "no training set kept") {
		t.Fatalf("a batch of indices with nothing kept: %v", err)
	}
}
