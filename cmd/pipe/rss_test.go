package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"pipe/internal/fixtures"
)

// TestMain lets a test run this binary as the pipe command: with
// PIPE_TEST_MAIN=1 it is pipe, so that a run's memory is a process's own,
// measured by the OS.
func TestMain(m *testing.M) {
	if os.Getenv("PIPE_TEST_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}))
	}
	os.Exit(m.Run())
}

// rssTolerance is how far the plan's total may be from the process's
// peak resident memory.
const rssTolerance = 0.10

// TestPlanTotalIsTheProcessPeak runs every example on the CPU (the native
// engine) for 30 optimizer steps, each in a process of its own, and holds
// the plan's total to the peak resident memory the OS measured for that
// process (wait4's rusage, read by this test, not by pipe). Fashion-MNIST
// and the Landsat scene are the real data (make data); the other examples
// read small fixtures written here.
func TestPlanTotalIsTheProcessPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("trains every example")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, need := range []string{"data/fashion-mnist/train-images-idx3-ubyte.gz", "data/L7_ETMs.tif", "data/landsat_volume.zarr/.zgroup"} {
		if _, err := os.Stat(filepath.Join(root, need)); err != nil {
			t.Fatalf("%s is missing: make data fetches it", need)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, real := range []string{"fashion-mnist", "L7_ETMs.tif", "olinda_dem_utm25s.tif", "landsat_volume.zarr"} {
		if err := os.Symlink(filepath.Join(root, "data", real), filepath.Join(dir, "data", real)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fixtures.Write(filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(root, "examples", "*.pipe"))
	var table strings.Builder
	fmt.Fprintf(&table, "%-12s %10s %10s %8s\n", "example", "planned", "measured", "error")
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		t.Run(name, func(t *testing.T) {
			// An optimizer step of cells' and pills' effective batch is
			// more images than the fixtures hold, and 30 of them minutes
			// of compute: they run with a smaller one. Accumulation sums
			// into the gradients in place, so it moves no memory.
			if name == "cells" || name == "pills" {
				src, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				s := regexp.MustCompile(`effective_batch +[0-9]+`).ReplaceAllString(string(src), "effective_batch 4")
				path = filepath.Join(dir, name+".pipe")
				if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rep := filepath.Join(dir, name+".report.json")
			cmd := exec.Command(os.Args[0], "run", "--device", "cpu", "--max-steps", "30", "--threads", "2",
				"--report", rep, "--checkpoint-dir", filepath.Join(dir, "ckpt", name), path)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PIPE_TEST_MAIN=1", "GOMEMLIMIT=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("pipe run: %v\n%s", err, out)
			}
			ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			if !ok || ru.Maxrss <= 0 {
				t.Skip("the OS gives no peak resident memory here")
			}
			measured := ru.Maxrss * 1024
			var r struct {
				Estimated int64 `json:"estimated_peak_bytes"`
				Measured  int64 `json:"measured_peak_bytes"`
			}
			b, err := os.ReadFile(rep)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			e := float64(r.Estimated-measured) / float64(measured)
			fmt.Fprintf(&table, "%-12s %10.1f %10.1f %+7.1f%%\n", name, float64(r.Estimated)/(1<<20), float64(measured)/(1<<20), 100*e)
			if math.Abs(e) > rssTolerance {
				t.Errorf("the plan says %d bytes; the process peaked at %d (getrusage): %+.1f%%, past %.0f%%\n%s", r.Estimated, measured, 100*e, 100*rssTolerance, out)
			}
			// The report's measured figure is the OS's too, its own
			// process's, which rises a little after it is read.
			if r.Measured <= 0 || r.Measured > measured {
				t.Errorf("the report says the process peaked at %d bytes; the OS says %d", r.Measured, measured)
			}
		})
	}
	t.Log("plan total against the process's peak resident memory, MiB, 30 steps on the CPU:\n" + table.String())
}
