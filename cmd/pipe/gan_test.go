package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGANExamplesTrain checks, plans and trains each gan example a few
// steps on the native engine from the repository's root (their data/
// paths), then resumes one step from the checkpoint, which holds both
// models and both optimizers: a checkpoint without the discriminator
// would not resume.
func TestGANExamplesTrain(t *testing.T) {
	if _, err := os.Stat("../../data/L7_ETMs.tif"); err != nil {
		t.Skip("the Landsat scene is not in data/ (make run fetches it)")
	}
	fixedHost(t)
	t.Chdir("../..")
	for _, name := range []string{"pix2pix_bands", "esrgan_landsat"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join("examples", name+".pipe")
			if code, _, stderr := runPipe(t, "", "check", file); code != exitOK {
				t.Fatalf("check: exit %d\n%s", code, stderr)
			}
			code, stdout, stderr := runPipe(t, "", "plan", "--device", "cpu", file)
			if code != exitOK || !strings.Contains(stdout, "Discriminator memory at batch 16") {
				t.Fatalf("plan: exit %d\n%s%s", code, stdout, stderr)
			}
			dir := t.TempDir()
			args := append(runArgs(dir, "--max-steps", "3"), file)
			if code, _, stderr := runPipe(t, "", args...); code != exitOK {
				t.Fatalf("run: exit %d\n%s", code, stderr)
			}
			rep := readReport(t, dir)
			losses := rep["step_losses"].([]any)
			if len(losses) != 3 {
				t.Fatalf("%d step losses, want 3", len(losses))
			}
			// The loss is the generator's objective, its parts beside it
			// (one micro-batch a step here).
			gan := rep["gan"].(map[string]any)
			parts := gan["step_parts"].([]any)
			if len(parts) != 3 {
				t.Fatalf("%d steps' parts, want 3", len(parts))
			}
			for i, p := range parts {
				p := p.(map[string]any)
				want := gan["adversarial_weight"].(float64)*p["adversarial"].(float64) + gan["l1_weight"].(float64)*p["l1"].(float64)
				if got := losses[i].(float64); math.Abs(got-want) > 1e-9*want || !(p["discriminator"].(float64) > 0) {
					t.Errorf("step %d: loss %v, parts %v", i+1, got, p)
				}
			}
			for _, l := range losses {
				if v := l.(float64); !(v > 0 && v < 1000) { // the generator's objective: l1 100 × an L1 distance near 1, plus the adversarial term
					t.Errorf("step loss %v", v)
				}
			}
			if code, _, stderr := runPipe(t, "", append(runArgs(dir, "--resume", "--max-steps", "4"), file)...); code != exitOK {
				t.Fatalf("resume: exit %d\n%s", code, stderr)
			}
			if n := len(readReport(t, dir)["step_losses"].([]any)); n != 4 {
				t.Errorf("%d step losses after resuming, want 4", n)
			}
		})
	}
}
