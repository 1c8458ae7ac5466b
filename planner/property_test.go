package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/planner/plan"
)

// planSrc checks and plans a source written in the test.
func planSrc(t *testing.T, src string, opts ...Option) (*plan.Plan, diag.Diagnostics) {
	t.Helper()
	prog := check(t, "test.pipe", []byte(src))
	opts = append([]Option{WithHost(testHost), WithSource([]byte(src))}, opts...)
	return Plan(prog, append([]Option{testCosts}, opts...)...)
}

// models are bodies of model blocks the properties are checked on: a plain
// conv net, a U-Net, an MLP, a small ViT and a ResNet.
var models = map[string]string{
	"convnet": `input [3, 128, 128]
  conv 64 k3 pad1 -> batchnorm -> relu -> conv 64 k3 pad1 -> batchnorm -> relu -> maxpool 2
  x = conv 128 k3 pad1 -> relu
  conv 128 k3 pad1 -> add x -> relu -> gap -> dense 10`,
	"unet":   "input [3, 256, 256]\n  unet depth 4 width 32 out 10",
	"mlp":    "input [4096]\n  mlp hidden [4096, 4096, 1024] out 10 dropout 0.1",
	"vit":    "input [3, 224, 224]\n  vit patch 16 depth 6 heads 8 dim 512 mlp_dim 2048 classes 10",
	"resnet": "input [3, 224, 224]\n  resnet50 classes 10",
}

// small is a device block where memory binds for every model above.
const small = `device small { memory 2GiB  bandwidth 500GB/s  fp32 10TFLOPS  fp16 40TFLOPS  bf16 40TFLOPS }
`

func program(model, device, precision, train string) string {
	return fmt.Sprintf(`pipeline prop
device %s
precision %s
%s
source data synthetic { samples 1000 shape [1] classes 10 }
model m {
  %s
}
train { epochs 10  optimizer adam lr 1e-3  loss cross_entropy  %s }
`, device, precision, small, models[model], train)
}

// setups are the devices and precisions the properties run on.
var setups = []struct{ device, precision string }{
	{"small", "bf16"}, {"small", "fp32"}, {"cpu", "fp32"}, {"t4-16gb", "auto"},
}

func TestMemoryGrowsWithBatch(t *testing.T) {
	for name := range models {
		for _, s := range setups {
			src := program(name, s.device, s.precision, "batch auto checkpoint none")
			prev, prevAct, prevAlloc := int64(-1), int64(-1), int64(-1)
			for _, b := range []int64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233} {
				p, _ := planSrc(t, src, WithBatch(b))
				if len(p.Memory.Phases) > 0 {
					// The caching allocator's segments are not monotone in
					// the batch (a tensor that outgrows 10 MiB leaves a
					// shared segment for one of its own); what the tensors
					// take is, and the activations grow.
					if prev >= 0 && (p.Memory.Activations <= prevAct || peakAllocated(p.Memory) < prevAlloc) {
						t.Errorf("%s on %s: at batch %d the activations (%d) or the allocated memory (%d) did not grow", name, s.device, b, p.Memory.Activations, peakAllocated(p.Memory))
					}
					prev, prevAct, prevAlloc = p.Memory.Total, p.Memory.Activations, peakAllocated(p.Memory)
					continue
				}
				if p.Memory.Total <= prev {
					t.Errorf("%s on %s: memory at batch %d is %d, not more than %d", name, s.device, b, p.Memory.Total, prev)
				}
				prev = p.Memory.Total
			}
		}
	}
}

// TestChosenBatchIsLargest: the batch auto picks fits, and the next step up
// (the next multiple of 8 where it was rounded for tensor cores) does not,
// with and without checkpointing.
func TestChosenBatchIsLargest(t *testing.T) {
	for name := range models {
		for _, s := range setups {
			for _, ck := range []string{"none", "auto"} {
				src := program(name, s.device, s.precision, "batch auto checkpoint "+ck)
				p, ds := planSrc(t, src, fitOnly())
				if ds.HasErrors() || !p.Fits {
					t.Fatalf("%s on %s: the chosen batch does not fit:\n%v", name, s.device, ds)
				}
				b := p.BatchSize
				if b >= defaultMaxBatch {
					continue // bounded by pipe's default, not by memory
				}
				step := int64(1)
				if p.Backend == plan.BackendGPU && p.Precision.Compute != "fp32" && b >= 8 {
					step = 8
				}
				next, _ := planSrc(t, src, WithBatch(b+step), fitOnly())
				if next.Fits {
					t.Errorf("%s on %s (checkpoint %s): batch %d was chosen but %d fits too (%s of %s)",
						name, s.device, ck, b, b+step, FormatBytes(next.Memory.Total), FormatBytes(next.Memory.Budget))
				}
				if step == 8 && b%8 != 0 {
					t.Errorf("%s on %s: batch %d is not a multiple of 8 for tensor cores", name, s.device, b)
				}
			}
		}
	}
}

// TestCheckpointNeverRaisesPeak sweeps batches through the point where the
// activations stop fitting: a plan with segments always peaks lower than
// the same batch without them, and fits.
func TestCheckpointNeverRaisesPeak(t *testing.T) {
	for name := range models {
		for _, s := range setups {
			src := program(name, s.device, s.precision, "batch auto checkpoint auto")
			none, _ := planSrc(t, program(name, s.device, s.precision, "batch auto checkpoint none"))
			auto, _ := planSrc(t, src)
			if auto.BatchSize < none.BatchSize {
				t.Errorf("%s on %s: checkpoint auto chose batch %d below %d without it", name, s.device, auto.BatchSize, none.BatchSize)
			}
			sawSegments := false
			for b := none.BatchSize; b <= auto.BatchSize; b += max(1, (auto.BatchSize-none.BatchSize)/6) {
				p, ds := planSrc(t, src, WithBatch(b))
				ck := p.Checkpoint
				if ck.PeakAfter > ck.PeakBefore {
					t.Errorf("%s at batch %d: checkpointing raised the peak from %d to %d", name, b, ck.PeakBefore, ck.PeakAfter)
				}
				if len(ck.Segments) > 0 {
					sawSegments = true
					if !p.Fits || ds.HasErrors() {
						t.Errorf("%s at batch %d: segments chosen but the plan does not fit", name, b)
					}
					if ck.ExtraFLOPs <= 0 && ck.ExtraPercent <= 0 {
						t.Errorf("%s at batch %d: recomputation reported as free", name, b)
					}
				}
			}
			if auto.BatchSize > none.BatchSize && !sawSegments {
				t.Errorf("%s on %s: checkpointing raised the batch from %d to %d but no plan had segments", name, s.device, none.BatchSize, auto.BatchSize)
			}
		}
	}
}

func TestEffectiveBatchReachedExactly(t *testing.T) {
	for _, name := range []string{"convnet", "unet", "mlp"} {
		for _, E := range []int64{1, 3, 7, 12, 64, 96, 100, 250, 1000, 4096} {
			src := program(name, "small", "bf16", fmt.Sprintf("batch auto effective_batch %d", E))
			p, ds := planSrc(t, src)
			if ds.HasErrors() {
				t.Fatalf("%s, effective_batch %d:\n%v", name, E, ds)
			}
			if p.BatchSize*p.AccumulationSteps != E || E%p.BatchSize != 0 || p.EffectiveBatch != E {
				t.Errorf("%s: effective_batch %d ran as %d × %d", name, E, p.BatchSize, p.AccumulationSteps)
			}
			if !p.Fits {
				t.Errorf("%s: effective_batch %d: micro-batch %d does not fit", name, E, p.BatchSize)
			}
		}
	}
}

func TestExplicitBatchMustDivide(t *testing.T) {
	src := program("convnet", "small", "bf16", "batch 48\n  effective_batch 64")
	_, ds := planSrc(t, src)
	if !diagAt(ds, "batch-not-divisor", 14) {
		t.Errorf("want batch-not-divisor at the effective_batch line, got:\n%v", ds)
	}
}

// TestAbsurdModel plans a 10^12-parameter dense layer: the counts are exact,
// nothing wraps negative, and the diagnostic at the model's name gives the
// numbers.
func TestAbsurdModel(t *testing.T) {
	src := `source data synthetic { samples 10 shape [1000000] classes 10 }
model huge {
  input [1000000]
  dense 1000000 -> dense 10
}
train { epochs 1  batch 1000000000000  optimizer adam  loss cross_entropy }
`
	for _, dev := range []string{"a100-80gb", "cpu"} {
		p, ds := planSrc(t, src, WithDevice(dev))
		if p == nil {
			t.Fatalf("no plan:\n%v", ds)
		}
		if want := int64(1e12 + 1e6 + 1e7 + 10); p.Parameters != want {
			t.Errorf("parameters %d, want %d", p.Parameters, want)
		}
		if p.Fits || !diagAt(ds, CodeNoFit, 2) {
			t.Errorf("want does-not-fit at the model's name (line 2), got:\n%v", ds)
		}
		for _, d := range ds {
			if d.Code == CodeNoFit && !strings.Contains(d.Detail, "TiB") {
				t.Errorf("the diagnostic does not give the size: %s", d.Detail)
			}
		}
		b, err := p.MarshalIndent()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		walkNumbers(v, func(path string, x float64) {
			if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("%s: %s is %g", dev, path, x)
			}
		})
	}
}

func walkNumbers(v any, fn func(string, float64)) {
	var walk func(string, any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case float64:
			fn(path, v)
		case map[string]any:
			for k, x := range v {
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		}
	}
	walk("", v)
}

func TestBatchThatDoesNotFit(t *testing.T) {
	prog, src := load(t, "../examples/fashion.pipe", "examples/fashion.pipe")
	p, ds := Plan(prog, testCosts, WithHost(testHost), WithSource(src), WithDevice("cpu"), WithBatch(100000))
	if p.Fits || diagAt(ds, CodeNoFit, 14) {
		t.Fatalf("want does-not-fit, not at the file's batch line 14 (WithBatch overrides it), got fits=%v:\n%v", p.Fits, ds)
	}
	found := false
	for _, d := range ds {
		if d.Code != CodeNoFit {
			continue
		}
		found = true
		if d.Subject != nil || d.Summary != "--batch 100000 does not fit on cpu" || !strings.Contains(d.Detail, "overrides the file's batch 64") {
			t.Errorf("the diagnostic blames the file: at %v: %s: %s", d.Subject, d.Summary, d.Detail)
		}
		if !strings.Contains(d.Detail, "largest batch that fits is") {
			t.Errorf("the diagnostic does not say what fits: %s", d.Detail)
		}
	}
	if !found {
		t.Fatalf("no %s:\n%v", CodeNoFit, ds)
	}
	// The file's own batch that does not fit is shown at its line.
	prog2 := check(t, "fashion.pipe", []byte(strings.Replace(string(src), " batch 64 ", " batch 100000 ", 1)))
	if p, ds := Plan(prog2, testCosts, WithHost(testHost), WithDevice("cpu")); p.Fits || !diagAt(ds, CodeNoFit, 14) {
		t.Fatalf("want does-not-fit at the batch line 14, got fits=%v:\n%v", p.Fits, ds)
	}
}

func TestUnknownDeviceFlag(t *testing.T) {
	prog, _ := load(t, "../examples/fashion.pipe", "examples/fashion.pipe")
	_, ds := Plan(prog, testCosts, WithHost(testHost), WithDevice("a100-80"))
	if len(ds) != 1 || ds[0].Code != "unknown-device" || ds[0].Suggestion != "a100-80gb" {
		t.Fatalf("want unknown-device suggesting a100-80gb, got:\n%v", ds)
	}
	_, ds = Plan(prog, testCosts, WithHost(testHost), WithDevice("cuda:0"))
	if len(ds) != 1 || ds[0].Code != "no-gpu" {
		t.Fatalf("want no-gpu on a host without one, got:\n%v", ds)
	}
}

func TestPrecisionFallbacks(t *testing.T) {
	cases := []struct {
		device, precision, compute string
		warn, loss                 bool
	}{
		{"t4-16gb", "bf16", "fp16", true, true},
		{"t4-16gb", "auto", "fp16", false, true},
		{"t4-16gb", "tf32", "fp32", true, false},
		{"a100-80gb", "auto", "bf16", false, false},
		{"a100-80gb", "tf32", "tf32", false, false},
		{"cpu", "bf16", "fp32", true, false},
		{"cpu", "fp16", "fp32", true, false},
		{"cpu", "auto", "fp32", false, false},
	}
	for _, c := range cases {
		src := program("convnet", c.device, c.precision, "batch 8")
		p, ds := planSrc(t, src)
		if p.Precision.Compute != c.compute || p.Precision.LossScaling != c.loss {
			t.Errorf("%s on %s: runs %s (loss scaling %v), want %s (%v)", c.precision, c.device, p.Precision.Compute, p.Precision.LossScaling, c.compute, c.loss)
		}
		if got := diagAt(ds, "precision-fallback", 3); got != c.warn {
			t.Errorf("%s on %s: warning at the precision line: %v, want %v\n%v", c.precision, c.device, got, c.warn, ds)
		}
		if p.Precision.Mixed != (c.compute == "fp16" || c.compute == "bf16") || p.Memory.Master > 0 != p.Precision.Mixed {
			t.Errorf("%s on %s: mixed %v with %d bytes of master weights", c.precision, c.device, p.Precision.Mixed, p.Memory.Master)
		}
	}
}

func TestOptimizerState(t *testing.T) {
	for _, c := range []struct {
		opt     string
		buffers int64
	}{{"sgd lr 0.1", 0}, {"sgd lr 0.1 momentum 0.9", 1}, {"adam", 2}, {"adamw", 2}} {
		src := strings.Replace(program("mlp", "cpu", "fp32", "batch 8"), "optimizer adam lr 1e-3", "optimizer "+c.opt, 1)
		p, _ := planSrc(t, src)
		if p.Memory.Optimizer != 4*c.buffers*p.Parameters {
			t.Errorf("%s: optimizer state %d bytes for %d parameters, want %d buffers", c.opt, p.Memory.Optimizer, p.Parameters, c.buffers)
		}
	}
}

func TestDeviceBlock(t *testing.T) {
	p, ds := planSrc(t, program("convnet", "small", "bf16", "batch 8"))
	if ds.HasErrors() || p.Device.Name != "small" || p.Device.Origin != "file" || p.Device.Memory != 2<<30 || p.Device.BF16 != 40e12 {
		t.Fatalf("device %+v\n%v", p.Device, ds)
	}
}

func TestLearningRateScaling(t *testing.T) {
	// The lr was written for batch 32; --batch 128 runs four times as many
	// samples per update.
	p, _ := planSrc(t, program("convnet", "small", "bf16", "batch 32"), WithBatch(128))
	if p.Optimizer.LR != 4e-3 || p.Optimizer.ReferenceBatch != 32 || p.Optimizer.WarmupEpochs == 0 {
		t.Errorf("lr %g for reference %d, warm-up %d", p.Optimizer.LR, p.Optimizer.ReferenceBatch, p.Optimizer.WarmupEpochs)
	}
	// An auto batch with an effective_batch runs exactly the effective
	// batch, so the lr stays.
	p, _ = planSrc(t, program("convnet", "small", "bf16", "batch auto effective_batch 256"))
	if p.Optimizer.LR != 1e-3 || p.Optimizer.LRScale != 1 {
		t.Errorf("lr %g scaled by %g", p.Optimizer.LR, p.Optimizer.LRScale)
	}
	// A batch and a larger effective_batch: the lr was written for the batch.
	p, _ = planSrc(t, program("convnet", "small", "bf16", "batch 16 effective_batch 64"))
	if p.Optimizer.LR != 4e-3 || p.AccumulationSteps != 4 {
		t.Errorf("lr %g with %d accumulation steps", p.Optimizer.LR, p.AccumulationSteps)
	}
}

func TestCheckpointAll(t *testing.T) {
	p, _ := planSrc(t, program("unet", "small", "bf16", "batch 4 checkpoint all"))
	q, _ := planSrc(t, program("unet", "small", "bf16", "batch 4 checkpoint none"))
	if len(p.Checkpoint.Segments) == 0 || p.Memory.Activations >= q.Memory.Activations {
		t.Errorf("checkpoint all: %d segments, activations %d vs %d without", len(p.Checkpoint.Segments), p.Memory.Activations, q.Memory.Activations)
	}
}

func TestPlanRoundTrip(t *testing.T) {
	prog, src := load(t, "../examples/cells.pipe", "examples/cells.pipe")
	p, _ := Plan(prog, testCosts, WithHost(testHost), WithSource(src))
	b, err := p.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	q, err := plan.Decode(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := q.MarshalIndent()
	if string(c) != string(b) {
		t.Error("the plan changes through JSON")
	}
	if err := q.Verify(src); err != nil {
		t.Error(err)
	}
	if err := q.Verify(append(src, ' ')); !errors.Is(err, plan.ErrSourceChanged) {
		t.Errorf("a changed source verifies: %v", err)
	}
	_, err = plan.Decode(strings.NewReader(strings.Replace(string(b), `"version": 1`, `"version": 99`, 1)))
	if err == nil {
		t.Error("a plan of another version loads")
	}
}

func TestHostFacts(t *testing.T) {
	total, avail := parseMeminfo(strings.NewReader("MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n"))
	if total != 24576000*1024 || avail != 20000000*1024 {
		t.Errorf("meminfo: %d %d", total, avail)
	}
	gpus := parseNvidiaSMI([]byte("NVIDIA A100-SXM4-80GB, 81920, 80000\nTesla T4, 15360, 15000\n"))
	if len(gpus) != 2 || gpus[0].MemFree != 80000<<20 {
		t.Fatalf("nvidia-smi: %+v", gpus)
	}
	h := HostInfo{MemTotal: 64 << 30, MemAvailable: 60 << 30, Cores: 8, GPUs: gpus}
	devs := Devices(nil, h)
	if devs[1].Name != "cuda:0" || devs[1].BF16 != 312e12 || devs[2].Name != "cuda:1" || devs[2].HasBF16 {
		t.Errorf("local GPUs: %+v %+v", devs[1], devs[2])
	}
	prog, _ := load(t, "../examples/fashion.pipe", "examples/fashion.pipe")
	p, _ := Plan(prog, testCosts, WithHost(h))
	if p.Device.Name != "cuda:0" || p.Memory.Capacity != 80000<<20 {
		t.Errorf("device auto with a GPU: %s with %d bytes", p.Device.Name, p.Memory.Capacity)
	}
}

// peakAllocated is the largest phase's allocated memory of a GPU plan.
func peakAllocated(m plan.Memory) int64 {
	var a int64
	for _, ph := range m.Phases {
		a = max(a, ph.Allocated)
	}
	return a
}

// fitOnly keeps an auto batch on the CPU at the largest that fits
// (no cpuSaturation), for the tests of the memory bounds.
func fitOnly() Option { return func(c *config) { c.largest = true } }
