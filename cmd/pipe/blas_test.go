package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFallbackBLASCoreIsLeft runs pipe, as a process of its own, where
// OpenBLAS falls back to its SSE3 core (simulated: OPENBLAS_CORETYPE=
// Prescott counted as the library's own choice, the hook
// PIPE_OPENBLAS_AS_LIBRARY): pipe devices, pipe plan and pipe run must
// run on a faster core and say which, and the choice is cached; a user's
// own OPENBLAS_CORETYPE is kept as it is.
func TestFallbackBLASCoreIsLeft(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tiny.pipe")
	if err := os.WriteFile(file, []byte(exportSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	pipe := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), append([]string{"PIPE_TEST_MAIN=1", "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"),
			"PIPE_OPENBLAS_CHOSE="}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pipe %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	fallback := []string{"OPENBLAS_CORETYPE=Prescott", "PIPE_OPENBLAS_AS_LIBRARY=1"}
	out := pipe(fallback, "devices")
	if !strings.Contains(out, "chosen by pipe over the library's Prescott (SSE) fallback") {
		t.Skipf("no faster core was chosen on this CPU (an SSE-only CPU, or a library built for one core):\n%s", out)
	}
	if strings.Contains(out, "(cached)") {
		t.Errorf("the first choice says it was cached:\n%s", out)
	}
	out = pipe(fallback, "plan", file)
	if !strings.Contains(out, "Its products run on OpenBLAS") || !strings.Contains(out, "fallback") || !strings.Contains(out, "(cached)") {
		t.Errorf("the plan does not name the cached choice:\n%s", out)
	}
	pipe(fallback, runArgs(dir, "--max-steps", "2", file)...)
	rep := readReport(t, dir)
	applied, _ := rep["engine_applied"].(map[string]any)
	blas, _ := applied["blas"].(string)
	if !strings.Contains(blas, "chosen by pipe") || strings.Contains(blas, "Prescott kernels") {
		t.Errorf("the report says the products ran on %q", blas)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cache", "pipe", "openblas-cores.json"))
	var cache map[string]any
	if err != nil || json.Unmarshal(b, &cache) != nil || len(cache) != 1 {
		t.Errorf("the cache: %v\n%s", err, b)
	}
	// The user's own choice is kept, Prescott included.
	out = pipe([]string{"OPENBLAS_CORETYPE=Prescott"}, "devices")
	if !strings.Contains(out, "Prescott kernels (SSE), as OPENBLAS_CORETYPE sets") {
		t.Errorf("a user's OPENBLAS_CORETYPE was not kept:\n%s", out)
	}
}

// TestForecastPlannedAndHeld: pipe plan times the plan's steps on the
// native engine and shows the epoch's time; pipe run finds it in the
// cache and holds it against the step time it measured, in the summary
// and the report.
func TestForecastPlannedAndHeld(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tiny.pipe")
	if err := os.WriteFile(file, []byte(exportSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	pipe := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "PIPE_TEST_MAIN=1", "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pipe %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := pipe("plan", file)
	for _, want := range []string{"Time (native engine on cpu)", "timed on the native engine with synthetic batches here", "estimated epoch time", "6 steps", "roofline"} {
		if !strings.Contains(out, want) {
			t.Errorf("pipe plan does not say %q:\n%s", want, out)
		}
	}
	out = pipe(runArgs(dir, file)...)
	if !strings.Contains(out, "step time: ") || !strings.Contains(out, "forecast (this plan's steps timed on the native engine with synthetic batches here, ") || !strings.Contains(out, "(cached)") {
		t.Errorf("the summary does not hold the cached forecast against the step:\n%s", out)
	}
	rep := readReport(t, dir)
	est, _ := rep["estimated_step_seconds"].(float64)
	meas, _ := rep["measured_step_seconds"].(float64)
	_, hasErr := rep["step_time_error_percent"].(float64)
	if est <= 0 || meas <= 0 || !hasErr || rep["estimated_epoch_seconds"] == nil {
		t.Errorf("the report's step times: estimated %v, measured %v, error %v, epoch %v", est, meas, rep["step_time_error_percent"], rep["estimated_epoch_seconds"])
	}
}
