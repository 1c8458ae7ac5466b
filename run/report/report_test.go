package report

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"pipe/engine"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/metric"
)

func result() *run.Result {
	val := func(loss, acc float64) *run.Evaluation {
		return &run.Evaluation{Source: "test", Part: "all", Samples: 100, Loss: loss,
			Metrics: []metric.Value{{Name: "accuracy", Value: acc}, {Name: "f1", Value: math.NaN()}}}
	}
	res := &run.Result{Pipeline: "p", Model: "m", Backend: "cpu", Precision: "fp32", Status: run.StatusCompleted,
		EpochsPlanned: 2, Epochs: 2, StepsPerEpoch: 3, Position: run.Position{Epoch: 2, Step: 6, MicroStep: 6, Samples: 60},
		StepLosses:     []float64{2, 1.5, 1.2, 1, 0.9, 0.8},
		EpochResults:   []run.EpochResult{{Epoch: 1, Step: 3, TrainLoss: 1.6, Val: val(1.3, 0.6), Seconds: 40, LoaderStallSeconds: 1.2}, {Epoch: 2, Step: 6, TrainLoss: 0.9, Val: val(1.0, 0.7)}},
		SamplesTrained: 60, SamplesPerSecond: 120, WallSeconds: 1,
		Memory: run.Memory{Estimated: 1000, Model: engine.MemStats{Total: 700}, Loader: 200, Measured: 900}}
	res.Final = res.EpochResults[1].Val
	return res
}

func TestReportJSON(t *testing.T) {
	p := &plan.Plan{File: "p.pipe", BatchSize: 10, AccumulationSteps: 1, EffectiveBatch: 10,
		Decisions: []plan.Decision{{What: "batch", Value: "10", Reason: "as written"}}}
	p.Memory.Total = 1000
	var b bytes.Buffer
	if err := New(result(), p).Encode(&b); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"estimated_peak_bytes": 1000, "measured_peak_bytes": 900, "steps": 6, "samples_per_second": 120} {
		if v[k] != want {
			t.Errorf("%s = %v, want %v", k, v[k], want)
		}
	}
	m := v["metrics"].(map[string]any)
	if m["accuracy"] != 0.7 || m["f1"] != nil {
		t.Errorf("metrics %v (a NaN must be null)", m)
	}
	if e := v["losses_per_epoch"].([]any); len(e) != 2 {
		t.Errorf("losses per epoch %v", e)
	} else if s := e[0].(map[string]any)["loader_stall_seconds"]; s != 1.2 {
		t.Errorf("epoch 1's loader_stall_seconds %v, want 1.2", s)
	}
	if d := v["plan"].(map[string]any)["decisions"].([]any); len(d) != 1 {
		t.Errorf("decisions %v", d)
	}
}

func TestLossCurveIsAPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loss.png")
	if err := LossCurve(result(), path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
		t.Errorf("image %v", b)
	}
}

func TestProgressLogLines(t *testing.T) {
	var b bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &b, Level: hclog.Info, DisableTime: true})
	p := NewProgress(&b, log, false)
	p.Every = 2
	h := p.Hooks()
	h.Start(run.StartInfo{Model: "m", Epochs: 1, StepsPerEpoch: 4, TotalSteps: 4})
	for s := int64(1); s <= 4; s++ {
		h.Step(run.StepInfo{Epoch: 1, Step: s, EpochStep: s, StepsPerEpoch: 4, TotalSteps: 4, Loss: 1 / float64(s), ETA: time.Duration(4-s) * time.Second})
	}
	h.Epoch(result().EpochResults[0])
	out := b.String()
	if n := strings.Count(out, "step:"); n != 2 {
		t.Errorf("%d step lines, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "epoch done") || !strings.Contains(out, "accuracy=0.6") {
		t.Errorf("no epoch line:\n%s", out)
	}
}

func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, nil, true)
	h := p.Hooks()
	h.Start(run.StartInfo{Model: "m", Backend: "cpu", Epochs: 2, StepsPerEpoch: 2, TotalSteps: 4, BatchSize: 8})
	h.Step(run.StepInfo{Epoch: 1, Step: 1, Loss: 0.5, SamplesPerSecond: 99})
	h.Epoch(result().EpochResults[0])
	p.Close()
	out := b.String()
	for _, want := range []string{"training m on cpu", "epoch 1/2: train loss 1.6000, test loss 1.3000, accuracy 0.6000", "loader stall 1.2 s of 40 s (3%)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in %q", want, out)
		}
	}
}

func TestSummary(t *testing.T) {
	var b bytes.Buffer
	Summary(&b, result(), "run.json", "run-loss.png")
	out := b.String()
	for _, want := range []string{"p: trained 2/2 epochs, 6 steps in 1s (120 samples/s)", "test (all, 100 samples): loss 1.0000, accuracy 0.7000", "900 B measured", "run-loss.png"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestNum: huge and tiny values are written in four significant digits,
// the rest with four decimals.
func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0.92191: "0.9219", 11.87: "11.8700", 3.9e19: "3.9e+19", 1.6e39: "1.6e+39",
		-2.5e7: "-2.5e+07", 0: "0.0000", 1.23456e-6: "1.235e-06", 99999.9: "99999.9000"} {
		if got := Num(v); got != want {
			t.Errorf("Num(%v) = %s, want %s", v, got, want)
		}
	}
}

// TestSummaryOfWorkersThatExited: a torch worker that exited before it was
// asked is held to its peak at exit on the CPU, and to nothing on a GPU or
// when none could be asked; never to pipe's own process.
func TestSummaryOfWorkersThatExited(t *testing.T) {
	for _, c := range []struct {
		mem            run.Memory
		want, unwanted string
	}{
		{run.Memory{Estimated: 250 << 20, Measured: 0, ProcessMaxRSS: 140 << 20, NotMeasured: "its workers could not be asked: gone"},
			"memory: 250.0 MiB planned; not measured, as its workers could not be asked: gone", "140.0 MiB"},
		{run.Memory{Estimated: 250 << 20, Measured: 256 << 20, ProcessMaxRSS: 140 << 20,
			Device: []engine.DeviceMemory{{Rank: 1, Device: "cpu", MaxRSS: 256 << 20, AtExit: true}}},
			"memory on cpu (rank 1): the torch worker's peak resident memory was 256.0 MiB at its exit", "140.0 MiB"},
		{run.Memory{Estimated: 250 << 20, ProcessMaxRSS: 140 << 20, NotMeasured: "rank 0's worker exited before its device was measured",
			Device: []engine.DeviceMemory{{Rank: 0, Device: "cuda:0", MaxRSS: 3 << 30, AtExit: true}}},
			"memory on cuda:0 (rank 0): not measured, as the torch worker exited first", "the plan is"},
		{run.Memory{Estimated: 250 << 20, ProcessMaxRSS: 140 << 20, NotMeasured: "rank 1's worker exited before it was measured",
			Device: []engine.DeviceMemory{{Rank: 1, Device: "cpu", AtExit: true}}},
			"memory on cpu (rank 1): not measured, as the torch worker exited first, 250.0 MiB planned", "the plan is"},
	} {
		res := result()
		res.Memory = c.mem
		var b bytes.Buffer
		Summary(&b, res, "", "")
		if out := b.String(); !strings.Contains(out, c.want) || strings.Contains(out, c.unwanted) {
			t.Errorf("want %q and no %q in:\n%s", c.want, c.unwanted, out)
		}
	}
}
