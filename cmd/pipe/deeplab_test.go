package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDeepLabExampleTrains checks, plans and trains
// examples/deeplab_olinda.pipe (DeepLabV3+ on a ResNet-18, the Landsat
// scene's bands to its elevation) for three optimizer steps on the CPU
// with the native engine, in a process of its own run from a folder
// holding the real data (make data).
func TestDeepLabExampleTrains(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, real := range []string{"L7_ETMs.tif", "olinda_dem_utm25s.tif"} {
		if _, err := os.Stat(filepath.Join(root, "data", real)); err != nil {
			t.Fatalf("data/%s is missing: make data fetches it", real)
		}
		if err := os.Symlink(filepath.Join(root, "data", real), filepath.Join(dir, "data", real)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(root, "examples", "deeplab_olinda.pipe")
	rep := filepath.Join(dir, "report.json")
	for _, args := range [][]string{
		{"check", path},
		{"plan", "--device", "cpu", path},
		{"run", "--device", "cpu", "--engine", "native", "--max-steps", "3", "--threads", "2", "--report", rep, "--checkpoint-dir", filepath.Join(dir, "ckpt"), path},
	} {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PIPE_TEST_MAIN=1", "GOMEMLIMIT=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pipe %s: %v\n%s", args[0], err, out)
		}
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Engine     string    `json:"engine"`
		Steps      int       `json:"steps"`
		StepLosses []float64 `json:"step_losses"`
		FinalLoss  float64   `json:"final_loss"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Engine != "native" || r.Steps != 3 || len(r.StepLosses) != 3 {
		t.Fatalf("engine %q, %d steps, step losses %v; want 3 native steps", r.Engine, r.Steps, r.StepLosses)
	}
	for _, l := range append(r.StepLosses, r.FinalLoss) {
		if math.IsNaN(l) || math.IsInf(l, 0) || l <= 0 {
			t.Errorf("a loss of %v in %v (validation %v)", l, r.StepLosses, r.FinalLoss)
		}
	}
}
