package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/engine/enginetest"
	"pipe/engine/torch"
)

// fakeBackend runs pipe run on the fake linear backend.
func fakeBackend(t *testing.T) {
	t.Helper()
	old := backends
	backends = func(engine.Setup) []engine.Backend { return []engine.Backend{&enginetest.Backend{Noise: 0.1}} }
	t.Cleanup(func() { backends = old })
}

const tinyPipe = `pipeline tiny
seed 4
source blobs synthetic { samples 240  shape [1, 4, 4]  classes 3  seed 9 }
source test synthetic { samples 240  shape [1, 4, 4]  classes 3  seed 9 }
model net {
  input [1, 4, 4]
  flatten -> dense 3
}
train { source blobs  epochs 2  batch 16  optimizer adam lr 0.05  loss cross_entropy  metrics [accuracy] }
evaluate { source test }
predict { source test  write "%s" }
`

// tiny writes the tiny pipeline into a fresh folder and returns the
// folder and the file.
func tiny(t *testing.T, src string) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = filepath.Join(dir, "tiny.pipe")
	if strings.Contains(src, "%s") {
		src = fmt.Sprintf(src, filepath.Join(dir, "pred.csv"))
	}
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func runArgs(dir string, more ...string) []string {
	return append([]string{"run", "--checkpoint-dir", filepath.Join(dir, "ckpt"), "--report", filepath.Join(dir, "run.json")}, more...)
}

func readReport(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRunTrainsReportsAndPredicts(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, tinyPipe)
	code, stdout, stderr := runPipe(t, "", runArgs(dir, file)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "tiny: trained 2/2 epochs, 30 steps") || !strings.Contains(stdout, "test (all, 240 samples)") ||
		!strings.Contains(stdout, "accuracy") {
		t.Errorf("summary:\n%s", stdout)
	}
	// Without a terminal, progress is log lines.
	if !strings.Contains(stderr, "epoch done") || !strings.Contains(stderr, "step:") {
		t.Errorf("no progress lines:\n%s", stderr)
	}
	v := readReport(t, dir)
	for _, k := range []string{"estimated_peak_bytes", "measured_peak_bytes", "steps", "samples_per_second", "metrics",
		"losses_per_epoch", "wall_seconds", "plan", "step_losses", "loss_curve"} {
		if _, ok := v[k]; !ok {
			t.Errorf("the report has no %q", k)
		}
	}
	if v["steps"] != 30.0 || v["status"] != "completed" {
		t.Errorf("steps %v, status %v", v["steps"], v["status"])
	}
	if _, err := os.Stat(filepath.Join(dir, "run-loss.png")); err != nil {
		t.Errorf("no loss curve: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pred.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 241 {
		t.Errorf("pred.csv has %d lines, want a header and 240 rows", n)
	}
}

func TestRunPlanFileMustMatchTheSource(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, tinyPipe)
	planFile := filepath.Join(dir, "plan.json")
	if code, _, stderr := runPipe(t, "", "plan", "--out", planFile, file); code != exitOK {
		t.Fatalf("plan: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runPipe(t, "", runArgs(dir, "--plan", planFile, "--max-steps", "3", file)...); code != exitOK {
		t.Fatalf("run --plan: exit %d\n%s", code, stderr)
	}
	// The plan names its file: FILE may be left out.
	if code, _, stderr := runPipe(t, "", runArgs(dir, "--plan", planFile, "--max-steps", "3")...); code != exitOK {
		t.Fatalf("run --plan without FILE: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runPipe(t, "", runArgs(dir, "--plan", planFile, "--device", "cpu", file)...); code != exitErrors || !strings.Contains(stderr, "--device") {
		t.Errorf("--plan with --device: exit %d\n%s", code, stderr)
	}
	f, _ := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("// edited\n")
	f.Close()
	code, _, stderr := runPipe(t, "", runArgs(dir, "--plan", planFile, file)...)
	if code != exitErrors || !strings.Contains(stderr, "source changed") || !strings.Contains(stderr, "pipe plan again") {
		t.Errorf("a changed source: exit %d\n%s", code, stderr)
	}
}

func TestRunChecksTorchFirstAndRefusesPlansThatDoNotFit(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	old := probeWorker
	probeWorker = func(python string) (engine.Runtime, error) {
		return engine.Runtime{}, &torch.StartError{Python: python, Reason: "cannot import torch", NoTorch: true}
	}
	t.Cleanup(func() { probeWorker = old })
	dir, file := tiny(t, tinyPipe)
	// A GPU plan runs on the torch engine, whose Python is checked before
	// any data is read.
	code, _, stderr := runPipe(t, "", runArgs(dir, "--device", "a100-80gb", "--python", "/opt/nowhere/python", file)...)
	if code != exitErrors || !strings.Contains(stderr, `"/opt/nowhere/python" cannot import torch`) || !strings.Contains(stderr, "PIPE_PYTHON") {
		t.Errorf("GPU plan without torch: exit %d\n%s", code, stderr)
	}
	probeWorker = func(python string) (engine.Runtime, error) {
		return engine.Runtime{Version: "2.11.0", Executable: python}, nil
	}
	code, _, stderr = runPipe(t, "", runArgs(dir, "--device", "a100-80gb", file)...)
	if code != exitErrors || !strings.Contains(stderr, "sees no CUDA device") {
		t.Errorf("GPU plan where torch sees no GPU: exit %d\n%s", code, stderr)
	}
	dir, file = tiny(t, strings.Replace(tinyPipe, "samples 240", "samples 8000000000", 1))
	code, _, stderr = runPipe(t, "", runArgs(dir, "--batch", "4000000000", file)...)
	if code != exitNoFit {
		t.Errorf("a batch that does not fit: exit %d, want %d\n%s", code, exitNoFit, stderr)
	}
}

func TestRunRendersDiagnostics(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, strings.Replace(tinyPipe, "input [1, 4, 4]", "input [1, 5, 5]", 1))
	code, _, stderr := runPipe(t, "", runArgs(dir, file)...)
	if code != exitErrors || !strings.Contains(stderr, "tiny.pipe:6:") || !strings.Contains(stderr, "^") ||
		!strings.Contains(stderr, "does not match the data") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
}

func TestRunInterruptedThenResumed(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, tinyPipe)
	ckpt := filepath.Join(dir, "ckpt", "last.ckpt")
	old := runContext
	t.Cleanup(func() { runContext = old })
	ctrlC := func(*app) (context.Context, func()) { // Ctrl-C before the first step
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	// Interrupted before it trained anything, a fresh run writes no
	// checkpoint and says to run again, not to resume.
	runContext = ctrlC
	code, _, stderr := runPipe(t, "", runArgs(dir, file)...)
	if code != exitInterrupted || !strings.Contains(stderr, "interrupted at epoch 1, step 0; nothing was trained, so no checkpoint was written") ||
		strings.Contains(stderr, "--resume") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(ckpt); err == nil {
		t.Fatal("a checkpoint of an untrained model was written")
	}

	runContext = old
	if code, _, stderr := runPipe(t, "", runArgs(dir, "--max-steps", "5", file)...); code != exitOK {
		t.Fatalf("--max-steps 5: exit %d\n%s", code, stderr)
	}
	trained, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	// Ctrl-C before the first step, afresh or resumed, leaves the
	// checkpoint of the 5 steps as it was.
	runContext = ctrlC
	code, _, stderr = runPipe(t, "", runArgs(dir, file)...)
	if code != exitInterrupted || !strings.Contains(stderr, "an earlier run's checkpoint will be replaced") {
		t.Errorf("afresh over a checkpoint: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runPipe(t, "", runArgs(dir, "--resume", file)...)
	if code != exitInterrupted || !strings.Contains(stderr, "step 5; nothing was trained since") || !strings.Contains(stderr, "unchanged; continue with: pipe run --resume") {
		t.Errorf("resumed: exit %d\n%s", code, stderr)
	}
	if b, err := os.ReadFile(ckpt); err != nil || string(b) != string(trained) {
		t.Fatalf("the checkpoint changed (%v)", err)
	}

	runContext = old
	code, _, stderr = runPipe(t, "", runArgs(dir, "--resume", file)...)
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if v := readReport(t, dir); v["steps"] != 30.0 || v["resumed_from"] == nil {
		t.Errorf("steps %v, resumed from %v", v["steps"], v["resumed_from"])
	}
	code, stdout, stderr := runPipe(t, "", runArgs(dir, "--resume", "--skip-train", file)...)
	if code != exitOK || !strings.Contains(stdout, "not trained") {
		t.Errorf("skip-train: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestRunCPUEndToEnd trains a small convolutional network with the real
// CPU backend: the loss falls, the accuracy is well above chance, and a run
// stopped after one epoch and resumed reproduces the straight run's losses
// bit for bit.
func TestRunCPUEndToEnd(t *testing.T) {
	fixedHost(t)
	src := `pipeline e2e
seed 7
source train synthetic { samples 768  shape [2, 8, 8]  classes 4  seed 3 }
model cnn {
  input [2, 8, 8]
  conv 8 k3 pad1 -> batchnorm -> relu -> maxpool 2
  flatten -> dropout 0.1 -> dense 4
}
train { epochs 3  batch 32  effective_batch 64  optimizer adam lr 1e-2  schedule cosine  loss cross_entropy  metrics [accuracy] }
evaluate { source train }
`
	steps := func(dir string) []float64 {
		var out []float64
		for _, v := range readReport(t, dir)["step_losses"].([]any) {
			out = append(out, v.(float64))
		}
		return out
	}
	dir, file := tiny(t, src)
	code, stdout, stderr := runPipe(t, "", runArgs(dir, file)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	want := steps(dir)
	if len(want) != 36 {
		t.Fatalf("%d steps, want 3 epochs of 12\n%s", len(want), stdout)
	}
	v := readReport(t, dir)
	acc, _ := v["metrics"].(map[string]any)["accuracy"].(float64)
	if acc < 0.8 {
		t.Errorf("accuracy %v on separable blobs, want at least 0.8", acc)
	}
	if v["measured_peak_bytes"].(float64) <= 0 || v["estimated_peak_bytes"].(float64) <= 0 {
		t.Errorf("memory: %v measured, %v estimated", v["measured_peak_bytes"], v["estimated_peak_bytes"])
	}

	dir2, file2 := tiny(t, src)
	if code, _, stderr := runPipe(t, "", runArgs(dir2, "--max-steps", "12", file2)...); code != exitOK {
		t.Fatalf("first half: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runPipe(t, "", runArgs(dir2, "--resume", file2)...); code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	got := steps(dir2)
	if len(got) != len(want) {
		t.Fatalf("%d losses after resuming, want %d", len(got), len(want))
	}
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("step %d: %v after resuming, %v straight", i+1, got[i], want[i])
		}
	}
}

func TestRunNonFiniteLossExitsWithTheLayer(t *testing.T) {
	fixedHost(t)
	old := backends
	backends = func(engine.Setup) []engine.Backend { return []engine.Backend{&enginetest.Backend{NaNAt: 20}} }
	t.Cleanup(func() { backends = old })
	dir, file := tiny(t, tinyPipe)
	code, _, stderr := runPipe(t, "", runArgs(dir, file)...)
	if code != exitErrors || !strings.Contains(stderr, "dense1 (dense) produced a non-finite value at step 20") ||
		!strings.Contains(stderr, "tiny.pipe:7:") || !strings.Contains(stderr, "last.ckpt") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if v := readReport(t, dir); v["status"] != "non-finite" || v["epochs"] != 1.0 {
		t.Errorf("report: status %v after %v epochs", v["status"], v["epochs"])
	}
}

// TestFailedResumeKeepsTheReport: a --resume whose last.ckpt is corrupt
// fails, names the checkpoints that are intact, and leaves the last
// good report as it was; --resume=PATH (and --resume PATH FILE) resumes
// from a chosen one.
func TestFailedResumeKeepsTheReport(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, strings.Replace(tinyPipe, "epochs 2", "epochs 3  save all", 1))
	if code, _, stderr := runPipe(t, "", runArgs(dir, file)...); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	good, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	last := filepath.Join(dir, "ckpt", "last.ckpt")
	b, _ := os.ReadFile(last)
	b[len(b)-5] ^= 0xff
	os.WriteFile(last, b, 0o644)
	code, _, stderr := runPipe(t, "", runArgs(dir, "--resume", file)...)
	if code != exitErrors || !strings.Contains(stderr, "corrupt") || !strings.Contains(stderr, "epoch-002.ckpt (epoch 2") ||
		!strings.Contains(stderr, "--resume=") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "run.json")); !bytes.Equal(now, good) {
		t.Error("the failed resume rewrote the report")
	}
	for _, args := range [][]string{
		{"--resume=" + filepath.Join(dir, "ckpt", "epoch-002.ckpt"), file},
		{"--resume", filepath.Join(dir, "ckpt", "epoch-002.ckpt"), file},
	} {
		code, _, stderr = runPipe(t, "", runArgs(dir, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
		if rep := readReport(t, dir); rep["resumed_from"] == nil {
			t.Errorf("%v: not resumed: %v", args, rep["resumed_from"])
		}
	}
}
