package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/engine/enginetest"
	"pipe/engine/torch"
	"pipe/internal/torchtest"
	"pipe/planner"
)

// torchPython is the Python the torch engine's tests drive, as
// engine/torch's tests find it.
func torchPython(t *testing.T) string { t.Helper(); return torchtest.Python(t) }

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strings.TrimPrefix(l.Addr().String(), "127.0.0.1:")
}

// TestRunDataParallelOnCPU trains tiny.pipe with pipe run --engine torch
// --nproc-per-node 2 (gloo on the CPU): the run reports both ranks'
// memory as their OS measured it, and its losses are those of one
// process with the doubled batch.
func TestRunDataParallelOnCPU(t *testing.T) {
	fixedHost(t)
	py := torchPython(t)
	dir, file := tiny(t, tinyPipe)
	code, stdout, stderr := runPipe(t, "", runArgs(dir, "--engine", "torch", "--python", py, "--nproc-per-node", "2",
		"--master-port", freePort(t), "--batch", "8", "--max-steps", "6", file)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	rep := readReport(t, dir)
	if rep["engine"] != "torch" {
		t.Errorf("engine %v", rep["engine"])
	}
	devs, _ := rep["devices"].([]any)
	if len(devs) != 2 {
		t.Fatalf("devices %v", rep["devices"])
	}
	for _, d := range devs {
		if m := d.(map[string]any); m["worker_max_rss_bytes"].(float64) <= 0 {
			t.Errorf("rank %v: no resident memory measured", m["rank"])
		}
	}
	plan := rep["plan"].(map[string]any)
	if plan["batch_size"].(float64) != 8 || plan["effective_batch"].(float64) != 16 {
		t.Errorf("batch %v, effective %v", plan["batch_size"], plan["effective_batch"])
	}
	ddp := rep["step_losses"].([]any)

	// One process with batch 16 trains the same steps.
	dir2, file2 := tiny(t, tinyPipe)
	code, stdout, stderr = runPipe(t, "", runArgs(dir2, "--engine", "torch", "--python", py, "--batch", "16", "--max-steps", "6", file2)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	one := readReport(t, dir2)["step_losses"].([]any)
	if len(one) != 6 || len(ddp) != 6 {
		t.Fatalf("%d and %d losses", len(one), len(ddp))
	}
	for i := range one {
		a, b := one[i].(float64), ddp[i].(float64)
		if d := (a - b) / a; d > 1e-5 || d < -1e-5 {
			t.Errorf("step %d: %.7g in one process, %.7g over two", i+1, a, b)
		}
	}
}

// TestRunRefusesMoreProcessesThanGPUs: --nproc-per-node 4 where torch
// sees 2 GPUs is an error before anything starts.
func TestRunRefusesMoreProcessesThanGPUs(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	old := probeWorker
	probeWorker = func(python string) (engine.Runtime, error) {
		return engine.Runtime{Version: "2.11.0", Executable: python, GPU: true, GPUs: 2}, nil
	}
	t.Cleanup(func() { probeWorker = old })
	dir, file := tiny(t, tinyPipe)
	code, _, stderr := runPipe(t, "", runArgs(dir, "--device", "a100-80gb", "--nproc-per-node", "4", file)...)
	if code != exitErrors || !strings.Contains(stderr, "--nproc-per-node 4 asks for 4 GPUs, and torch sees 2") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	// The native engine does not train on several devices.
	code, _, stderr = runPipe(t, "", runArgs(dir, "--engine", "native", "--nproc-per-node", "2", file)...)
	if code != exitErrors || !strings.Contains(stderr, "needs the torch engine") {
		t.Errorf("native with 2 processes: exit %d\n%s", code, stderr)
	}
}

// TestPlanPerDevice: pipe plan --nproc-per-node 8 --nnodes 2 plans the
// batch per device, and says what the all-reduce moves per step.
func TestPlanPerDevice(t *testing.T) {
	fixedHost(t)
	inRoot(t)
	code, stdout, stderr := runPipe(t, "", "plan", "--json", "--device", "a100-80gb", "--batch", "64", "--nproc-per-node", "8", "--nnodes", "2", "examples/fashion.pipe")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var p struct {
		BatchSize      int64 `json:"batch_size"`
		EffectiveBatch int64 `json:"effective_batch"`
		Parameters     int64 `json:"parameters"`
		Engine         struct{ Name string }
		Distributed    struct {
			WorldSize      int    `json:"world_size"`
			Backend        string `json:"backend"`
			AllReduceBytes int64  `json:"allreduce_bytes"`
			NetworkBytes   int64  `json:"network_bytes"`
		}
		Decisions []struct{ What, Value, Reason string }
	}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	if p.Engine.Name != "torch" || p.Distributed.WorldSize != 16 || p.Distributed.Backend != "nccl" {
		t.Errorf("engine %s, world %d over %s", p.Engine.Name, p.Distributed.WorldSize, p.Distributed.Backend)
	}
	if p.BatchSize != 64 || p.EffectiveBatch != 64*16 {
		t.Errorf("batch %d, effective %d", p.BatchSize, p.EffectiveBatch)
	}
	// A hierarchical all-reduce: 2(G-1)/G of the fp32 gradients a
	// device within a node, 2(N-1)/N a node between the 2 nodes.
	if want := p.Parameters * 4 * 2 * 7 / 8; p.Distributed.AllReduceBytes != want || p.Distributed.NetworkBytes != p.Parameters*4 {
		t.Errorf("all-reduce %d bytes a device, %d a node; want %d and %d", p.Distributed.AllReduceBytes, p.Distributed.NetworkBytes, want, p.Parameters*4)
	}
	var lr string
	for _, d := range p.Decisions {
		if d.What == "lr" {
			lr = d.Reason
		}
	}
	if !strings.Contains(lr, "1024/64") {
		t.Errorf("the lr is not scaled for 16 devices: %s", lr)
	}
	code, stdout, _ = runPipe(t, "", "plan", "--device", "a100-80gb", "--batch", "64", "--nproc-per-node", "8", "--nnodes", "2", "examples/fashion.pipe")
	if code != exitOK || !strings.Contains(stdout, "batch 64 per device × 16 devices = 1024") || !strings.Contains(stdout, "per device)") ||
		!strings.Contains(stdout, "all-reduce") {
		t.Errorf("table:\n%s", stdout)
	}
}

// TestDeviceAutoWithAGPU: device auto on a machine with a GPU plans for
// it with the torch engine; when the torch engine cannot start, the run
// falls back to the CPU with the native engine and says so, instead of
// refusing.
func TestDeviceAutoWithAGPU(t *testing.T) {
	oldHost := hostInfo
	hostInfo = func() planner.HostInfo {
		return planner.HostInfo{MemTotal: 24 << 30, MemAvailable: 24 << 30, Cores: 2,
			GPUs: []planner.GPUInfo{{Name: "NVIDIA A100-SXM4-80GB", MemTotal: 80 << 30, MemFree: 80 << 30}}}
	}
	oldBackends, oldProbe := backends, probeWorker
	backends = func(engine.Setup) []engine.Backend {
		return []engine.Backend{&enginetest.Backend{}, &enginetest.Backend{BackendName: "torch"}}
	}
	t.Cleanup(func() { hostInfo, backends, probeWorker = oldHost, oldBackends, oldProbe })

	// torch cannot start: the CPU trains, with a warning that says why.
	probeWorker = func(python string) (engine.Runtime, error) {
		return engine.Runtime{}, &torch.StartError{Python: python, Reason: "cannot import torch", NoTorch: true}
	}
	dir, file := tiny(t, tinyPipe)
	code, _, stderr := runPipe(t, "", runArgs(dir, "--max-steps", "2", file)...)
	if code != exitOK || !strings.Contains(stderr, "device auto found cuda:0") || !strings.Contains(stderr, "training on the CPU with the native engine") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if rep := readReport(t, dir); rep["engine"] != "native" || rep["device"] != "cpu" {
		t.Errorf("engine %v on %v", rep["engine"], rep["device"])
	}
	// torch starts and sees the GPU: the torch engine trains on it.
	probeWorker = func(python string) (engine.Runtime, error) {
		return engine.Runtime{Version: "2.11.0", Executable: python, GPU: true, GPUs: 1}, nil
	}
	dir, file = tiny(t, tinyPipe)
	code, _, stderr = runPipe(t, "", runArgs(dir, "--max-steps", "2", file)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if rep := readReport(t, dir); rep["engine"] != "torch" || rep["device"] != "cuda:0" {
		t.Errorf("engine %v on %v", rep["engine"], rep["device"])
	}
}
