package native

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"pipe/dataset"
	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/run"
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
	src, err := os.ReadFile(filepath.Join(root, "examples", "volume_unet.pipe"))
	if err != nil {
		t.Fatal(err)
	}
	// The prediction goes to a temporary folder, its windows edge to edge
	// (overlap 0: 2 x 11 x 11 windows) to keep the test short.
	dir := t.TempDir()
	out := filepath.Join(dir, "pred.zarr")
	src = bytes.Replace(src, []byte(`write "out/volume_unet_pred.zarr"  overlap 0.5`), []byte(`write "`+out+`"  overlap 0`), 1)
	prog := loadProgram(t, writeTemp(t, dir, src))
	p := planCPU(t, prog, planHost, planner.WithBatch(4))
	res, ds := run.Run(context.Background(), p, progtest.Decoded(t, prog), run.Hooks{},
		run.WithBackend(Backend{}), run.WithBase(root), run.WithCheckpointDir(dir), run.WithMaxSteps(3), run.WithThreads(2))
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
	// The prediction covers the whole stack, in the scene's units.
	if len(res.Predictions) != 1 || res.Predictions[0].Format != "zarr" || res.Predictions[0].Samples != 2*11*11 {
		t.Fatalf("predictions %+v", res.Predictions)
	}
	a, err := dataset.ReadZarr(out)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.Shape) != "[1 6 352 349]" {
		t.Fatalf("prediction shape %v", a.Shape)
	}
	var sum float64
	for _, v := range a.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("the prediction has a voxel no window covered, or a non-finite value")
		}
		sum += float64(v)
	}
	if m := sum / float64(len(a.Data)); m < 20 || m > 150 {
		t.Errorf("the prediction's mean %.1f is not in the scene's units (its mean is about 69)", m)
	}
}

func writeTemp(t *testing.T, dir string, src []byte) string {
	t.Helper()
	p := filepath.Join(dir, "volume_unet.pipe")
	if err := os.WriteFile(p, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
