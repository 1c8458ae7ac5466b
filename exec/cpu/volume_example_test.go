package cpu

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"pipe/exec"
	"pipe/planner"
)

// TestVolumeExample checks and plans examples/volume_unet.pipe and trains
// it for a few steps on the native engine, on the volume `make data`
// builds, then evaluates the held-out windows: a 3-D U-Net, end to end,
// from a Zarr source.
func TestVolumeExample(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "data", "landsat_volume.zarr", "noisy", ".zarray")); err != nil {
		t.Skip("data/landsat_volume.zarr absent (run make data)")
	}
	prog := loadProgram(t, filepath.Join(root, "examples", "volume_unet.pipe"))
	p := planCPU(t, prog, planHost, planner.WithBatch(4))
	dir := t.TempDir()
	res, ds := exec.Run(context.Background(), p, prog, exec.Hooks{},
		exec.WithBackend(Backend{}), exec.WithBase(root), exec.WithCheckpointDir(dir), exec.WithMaxSteps(3), exec.WithThreads(2))
	if ds.HasErrors() {
		t.Fatalf("run failed:\n%v", ds)
	}
	if len(res.StepLosses) != 3 {
		t.Fatalf("%d steps; want 3", len(res.StepLosses))
	}
	for _, l := range res.StepLosses {
		if math.IsNaN(l) || math.IsInf(l, 0) || l <= 0 {
			t.Errorf("step losses %v", res.StepLosses)
		}
	}
	// The held-out windows (10% of 840) are evaluated in the scene's units.
	if res.Final == nil || res.Final.Samples != 84 || len(res.Final.Metrics) != 2 || res.TargetScaling == nil {
		t.Fatalf("evaluation %+v, target scaling %v", res.Final, res.TargetScaling)
	}
	t.Logf("losses %v; %d validation windows: loss %.4g, %v", res.StepLosses, res.Final.Samples, res.Final.Loss, res.Final.Metrics)
}
