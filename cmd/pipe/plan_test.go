package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pipe/engine/torch"
	"pipe/planner"
	"pipe/spec"
)

// fixedHost replaces the machine for the plan and devices commands: 24 GiB
// and 2 cores, no GPU.
func fixedHost(t *testing.T) {
	t.Helper()
	old, oldCache := hostInfo, forecastCache
	hostInfo = func() planner.HostInfo {
		return planner.HostInfo{MemTotal: 24 << 30, MemAvailable: 24 << 30, Cores: 2}
	}
	forecastCache = nil
	t.Cleanup(func() { hostInfo, forecastCache = old, oldCache })
}

// TestPlanExamples plans every example from the repository's root, where
// its data is (make data); the three whose data make data does not fetch
// plan with the run's "cannot read source" error (exit 1) when it is
// absent, the plan still shown.
func TestPlanExamples(t *testing.T) {
	fixedHost(t)
	paths := examplePaths(t)
	inRoot(t)
	for _, path := range paths {
		path = strings.TrimPrefix(path, "../../")
		src, _ := os.ReadFile(path)
		own := strings.Contains(string(src), "not fetched by `make data`")
		for _, dev := range []string{"cpu", "a100-80gb"} {
			code, stdout, stderr := runPipe(t, "", "plan", "--device", dev, path)
			if code != exitOK && !(own && code == exitErrors && strings.Contains(stderr, "error: cannot read source")) {
				t.Errorf("%s on %s: exit %d\n%s", path, dev, code, stderr)
			}
			for _, want := range []string{"NAME", "ACTIVATIONS", "Memory at batch", "budget", "Decisions", "step time"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("%s on %s: the table has no %q", path, dev, want)
				}
			}
		}
	}
}

func TestPlanJSON(t *testing.T) {
	fixedHost(t)
	inRoot(t)
	code, stdout, stderr := runPipe(t, "", "plan", "--json", "--device", "a100-80gb", "examples/fashion.pipe")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "source_sha256", "device", "precision", "parameters", "batch_size",
		"accumulation_steps", "memory", "layers", "decisions"} {
		if _, ok := v[k]; !ok {
			t.Errorf("the plan has no %q", k)
		}
	}
	mem, _ := v["memory"].(map[string]any)
	for _, k := range []string{"parameters", "gradients", "optimizer", "activations", "workspace", "total", "budget"} {
		if _, ok := mem[k].(float64); !ok {
			t.Errorf("memory has no %q", k)
		}
	}
	ds, _ := v["decisions"].([]any)
	for _, d := range ds {
		d, _ := d.(map[string]any)
		if d["what"] == "" || d["value"] == "" || d["reason"] == "" {
			t.Errorf("decision without what, value or reason: %v", d)
		}
	}
	// The plan carries the sources as the run decodes them, without
	// their positions in the file.
	var p struct {
		Sources []spec.Source `json:"sources"`
	}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Sources) != 2 || p.Sources[0].Name != "train" || p.Sources[0].IDX == nil ||
		p.Sources[0].IDX.Labels != "data/fashion-mnist/train-labels-idx1-ubyte.gz" ||
		p.Sources[0].Split == nil || p.Sources[0].Split.Fraction != 0.95 || p.Sources[1].Name != "test" {
		t.Errorf("sources: %+v", p.Sources)
	}
	if strings.Contains(stdout, `"at"`) {
		t.Error("the plan's sources carry their positions in the file")
	}
}

func TestPlanOut(t *testing.T) {
	fixedHost(t)
	out := filepath.Join(t.TempDir(), "plan.json")
	inRoot(t)
	path := "examples/fashion.pipe"
	code, _, stderr := runPipe(t, "", "plan", "--out", out, path)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	p, err := planner.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(path)
	if err := p.Verify(src); err != nil {
		t.Error(err)
	}
	if err := p.Verify(append(src, '\n')); err == nil {
		t.Error("a changed source verifies")
	}
}

func TestPlanBatchDoesNotFit(t *testing.T) {
	fixedHost(t)
	inRoot(t)
	code, _, stderr := runPipe(t, "", "plan", "--batch", "50000", "examples/fashion.pipe")
	if code != exitNoFit {
		t.Fatalf("exit %d, want %d\n%s", code, exitNoFit, stderr)
	}
	// The batch is the flag's, not the file's: the error names the flag
	// and puts no caret under the file's batch line.
	if !strings.HasPrefix(stderr, "error: --batch 50000 does not fit on cpu") ||
		strings.Contains(stderr, "fashion.pipe:14") || !strings.Contains(stderr, "overrides the file's batch") ||
		!strings.Contains(stderr, "largest batch that fits") {
		t.Errorf("the diagnostic blames the file's batch line or does not say what fits:\n%s", stderr)
	}
	// The file's own batch that does not fit is still shown at its line.
	dir := t.TempDir()
	src, _ := os.ReadFile("examples/fashion.pipe")
	file := filepath.Join(dir, "fashion.pipe")
	os.WriteFile(file, []byte(strings.Replace(string(src), " batch 64 ", " batch 50000 ", 1)), 0o644)
	code, _, stderr = runPipe(t, "", "plan", file)
	if code != exitNoFit || !strings.Contains(stderr, "fashion.pipe:14:19: error: batch 50000 does not fit on cpu") {
		t.Errorf("the file's batch: exit %d\n%s", code, stderr)
	}
}

func TestPlanUnknownDevice(t *testing.T) {
	fixedHost(t)
	code, _, stderr := runPipe(t, "", "plan", "--device", "a100-80gbb", "../../examples/fashion.pipe")
	if code != exitErrors || !strings.Contains(stderr, "Did you mean 'a100-80gb'?") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}

const hugeModel = `source data synthetic { samples 10 shape [1000000] classes 10 }
model huge {
  input [1000000]
  dense 1000000
}
train { epochs 1  batch 8  optimizer adam  loss cross_entropy }
`

func TestPlanModelTooLarge(t *testing.T) {
	fixedHost(t)
	code, _, stderr := runPipe(t, hugeModel, "plan", "--device", "a100-80gb", "-")
	if code != exitNoFit {
		t.Fatalf("exit %d, want %d\n%s", code, exitNoFit, stderr)
	}
	if !strings.Contains(stderr, "<stdin>:2:7: error: model huge does not fit on a100-80gb even at batch 1") {
		t.Errorf("no diagnostic at the model's name:\n%s", stderr)
	}
}

func TestDevices(t *testing.T) {
	fixedHost(t)
	code, stdout, stderr := runPipe(t, "", "devices")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"cpu", "a100-80gb", "t4-16gb", "312 TFLOP/s", "2.04 TB/s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("pipe devices does not list %q:\n%s", want, stdout)
		}
	}
	src := "device mine { memory 8GiB  bandwidth 400GB/s  fp32 10TFLOPS }\n"
	code, stdout, stderr = runPipe(t, src, "devices", "--json", "-")
	if code != exitOK || !strings.Contains(stdout, `"name": "mine"`) || !strings.Contains(stdout, `"origin": "file"`) {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestPlanTorchVersion: a GPU plan made without a worker is priced for
// an assumed torch and says so; --torch-version prices another, and the
// plan differs in exactly the terms that depend on it (attention's saved
// tensors, Inductor's buffer, torch.compile, AdamW's fused kernel, and
// the allocator's packing of them).
func TestPlanTorchVersion(t *testing.T) {
	fixedHost(t)
	inRoot(t)
	type planJSON struct {
		Engine struct {
			Torch        string `json:"torch"`
			TorchAssumed bool   `json:"torch_assumed"`
			CUDAGraph    bool   `json:"cuda_graph"`
		} `json:"engine"`
		Memory struct {
			Terms []struct {
				Name, Source, Basis string
				Bytes               int64
			} `json:"terms"`
		} `json:"memory"`
	}
	planOf := func(args ...string) (planJSON, map[string]string) {
		args = append([]string{"plan", "--json", "--device", "h100-80gb", "--batch", "128"}, append(args, "examples/vit_fashion.pipe")...)
		code, stdout, stderr := runPipe(t, "", args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
		var p planJSON
		if err := json.Unmarshal([]byte(stdout), &p); err != nil {
			t.Fatal(err)
		}
		terms := map[string]string{}
		for _, tm := range p.Memory.Terms {
			terms[tm.Name] = fmt.Sprint(tm.Bytes, tm.Source, tm.Basis)
		}
		return p, terms
	}
	assumed, aTerms := planOf()
	old, oTerms := planOf("--torch-version", "1.13")
	newer, nTerms := planOf("--torch-version", "2.11")
	if assumed.Engine.Torch != torch.AssumedGPUTorch || !assumed.Engine.TorchAssumed {
		t.Errorf("without --torch-version the plan names torch %q (assumed %v), want %s assumed", assumed.Engine.Torch, assumed.Engine.TorchAssumed, torch.AssumedGPUTorch)
	}
	if old.Engine.Torch != "1.13" || old.Engine.TorchAssumed || newer.Engine.Torch != "2.11" || newer.Engine.TorchAssumed {
		t.Errorf("the plans name %+v and %+v, want 1.13 and 2.11 as given", old.Engine, newer.Engine)
	}
	if !maps.Equal(aTerms, nTerms) {
		t.Errorf("the assumed torch and --torch-version 2.11 price differently:\n%v\n%v", aTerms, nTerms)
	}
	// torch 2.11 takes one CUDA graph a step where 1.13 cannot (its
	// fused optimizers take no tensor learning rate): the graph's pool,
	// its static inputs and the eager last batch beside them are 2.11's
	// alone, and move the allocator's rounding.
	graphs := func(name string) bool {
		return strings.HasPrefix(name, "CUDA graph ") || strings.HasPrefix(name, "eager last batch: ") || name == "allocator: 512-byte rounding"
	}
	var differ, graphTerms []string
	for name, v := range nTerms {
		switch {
		case graphs(name):
			graphTerms = append(graphTerms, name)
		case oTerms[name] != v:
			differ = append(differ, name)
		}
	}
	slices.Sort(differ)
	want := []string{"Inductor autotuning buffer", "allocator: reserved - allocated", "optimizer temporaries",
		"saved activations", "saved activations (backward peak)", "torch.compile"}
	if !slices.Equal(differ, want) {
		t.Errorf("torch 1.13 and 2.11 differ in %q, want %q", differ, want)
	}
	if !newer.Engine.CUDAGraph || old.Engine.CUDAGraph || !slices.Contains(graphTerms, "CUDA graph private pool") {
		t.Errorf("CUDA graph: torch 2.11 %v, 1.13 %v (want on and off); 2.11's graph terms %q", newer.Engine.CUDAGraph, old.Engine.CUDAGraph, graphTerms)
	}
	for name := range oTerms {
		if graphs(name) && name != "allocator: 512-byte rounding" {
			t.Errorf("torch 1.13's plan has %q", name)
		}
	}
	code, _, stderr := runPipe(t, "", "plan", "--torch-version", "1.12", "examples/vit_fashion.pipe")
	if code != exitErrors || !strings.Contains(stderr, "--torch-version: torch 1.12: pipe's worker needs 1.13 or later") {
		t.Errorf("--torch-version 1.12: exit %d\n%s", code, stderr)
	}
}
