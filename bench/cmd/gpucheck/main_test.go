package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pipe/planner/plan"
)

// TestMemoryErrors: the peak phase's reserved estimate is held against
// max_memory_reserved and the total against the device's used memory.
func TestMemoryErrors(t *testing.T) {
	m := plan.Memory{Total: 1500, PeakPhase: plan.PhaseBackward, Phases: []plan.MemoryPhase{
		{Name: plan.PhaseForward, Allocated: 700, Reserved: 800, Device: 1300},
		{Name: plan.PhaseBackward, Allocated: 900, Reserved: 1000, Device: 1500}}}
	rsv, alloc, ph := estimates(m)
	if rsv != 1000 || alloc != 900 || ph != plan.PhaseBackward {
		t.Fatalf("estimates: %d %d %s", rsv, alloc, ph)
	}
	r := Result{Example: "x", EstimatedBytes: 1500, EstimatedReservedBytes: rsv, EstimatedAllocatedBytes: alloc, PeakPhase: ph,
		MaxReservedBytes: 800, DeviceUsedBytes: 2000, ErrorReservedPercent: errorPercent(rsv, 800), ErrorUsedPercent: errorPercent(1500, 2000)}
	var b bytes.Buffer
	printMemory(&b, []Result{r})
	if out := b.String(); !strings.Contains(out, "+25.0%") || !strings.Contains(out, "-25.0%") {
		t.Errorf("the errors are not printed:\n%s", out)
	}
	if errorPercent(1, 0) != nil {
		t.Error("an error against nothing measured")
	}
}

// TestSmokeSaysNoGPU: make gpu-smoke, run from a bundle on a machine whose
// nvidia-smi lists no GPU, says so and exits 2 before it writes anything.
func TestSmokeSaysNoGPU(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"bin/pipe-static", "bin/gpucheck", "bench/gpu/smoke_json.py", "bench/gpu/resnet50_plain.py"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake := filepath.Join(dir, "fakebin")
	if err := os.MkdirAll(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	smi := "#!/bin/sh\necho 'No devices were found'\nexit 6\n"
	if err := os.WriteFile(filepath.Join(fake, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../gpu/smoke.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "out")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "no GPU here") {
		t.Fatalf("smoke.sh without a GPU: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("smoke.sh wrote its output folder without a GPU: %v", err)
	}
}
