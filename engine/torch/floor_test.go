package torch

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/planner/plan"
)

// TestHostFloorIsItsSources: host_floor.json's figures are those its
// sources measured, derived again here, so that a new measurement and
// the data cannot drift apart: on the CPU the worker's CPU time a step
// beyond PyTorch's own loop at 1 and K steps a command
// (bench/protocol.json's floor_step_ms and floor_command_ms, which the
// microbenchmark splits), on a GPU the least of make gpu-smoke's rows,
// every example and run (a step: the compiled network's own loop, whose
// least is the MLP's, the device's work being microseconds; a command:
// pipe's step less that loop, at one step a command), so that it is a
// floor under each of them.
func TestHostFloorIsItsSources(t *testing.T) {
	near := func(what string, got, want float64) {
		t.Helper()
		if !(want > 0) || math.Abs(got-want) > 0.005*want {
			t.Errorf("%s: host_floor.json holds %.6g s, its source gives %.6g s", what, got, want)
		}
	}
	var proto struct {
		Date    string  `json:"date"`
		Step    float64 `json:"floor_step_ms"`
		Command float64 `json:"floor_command_ms"`
	}
	readJSON(t, "../../bench/protocol.json", &proto)
	cpu := Cost{}.HostFloor(plan.BackendCPU)
	near("cpu step", cpu.StepSeconds, proto.Step/1e3)
	near("cpu command", cpu.CommandSeconds, proto.Command/1e3)
	if cpu.Overlaps || !strings.Contains(cpu.Source, "bench/protocol.json") || !strings.Contains(cpu.Source, proto.Date[:10]) {
		t.Errorf("cpu: overlaps %v, source %q: want the CPU's host adding to its compute, and bench/protocol.json of %s", cpu.Overlaps, cpu.Source, proto.Date[:10])
	}

	runs, _ := filepath.Glob("../../bench/gpu/nvidia-h100-80gb-hbm3*.json")
	step, command := math.Inf(1), math.Inf(1)
	for _, f := range runs {
		var smoke struct {
			GPUCheck []struct {
				Batch float64 `json:"batch"`
				Pipe  float64 `json:"samples_per_second"`
				Plain float64 `json:"plain_samples_per_second"`
			} `json:"gpucheck"`
		}
		readJSON(t, f, &smoke)
		for _, r := range smoke.GPUCheck {
			step = min(step, r.Batch/r.Plain)
			command = min(command, r.Batch/r.Pipe-r.Batch/r.Plain)
		}
	}
	if len(runs) == 0 {
		t.Fatal("no make gpu-smoke JSONs of the H100 under bench/gpu")
	}
	gpu := Cost{}.HostFloor(plan.BackendGPU)
	near("gpu step", gpu.StepSeconds, step)
	near("gpu command", gpu.CommandSeconds, command)
	if !gpu.Overlaps || !strings.Contains(gpu.Source, "H100") {
		t.Errorf("gpu: overlaps %v, source %q: want the device overlapping the host, measured on the H100", gpu.Overlaps, gpu.Source)
	}
	if (Cost{}).HostFloor("tpu").Known() {
		t.Error("a device kind host_floor.json does not hold has a floor")
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
