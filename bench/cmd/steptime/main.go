// Command steptime holds each example's forecast step time to the step
// its run measured, on both engines on the CPU: every example runs for a
// few optimizer steps as a process of its own with a fresh forecast
// cache, and the table gives the plan's forecast (the native engine's
// timed steps; for the torch engine, the step of a first run, so its
// example runs twice), the run's measured step (training seconds over
// steps, by the clock), their error, the roofline, and the planned and
// measured memory (VmHWM). It writes bench/steptime.json, naming the CPU
// and the BLAS kernels. A timing, so not a test: make bench runs it on a
// quiet machine.
//
//	go run ./bench/cmd/steptime [-pipe bin/pipe] [-steps 30] [-engines native,torch] [-only fashion,olinda] [-out bench/steptime.json]
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"pipe/engine/native"
	"pipe/internal/memrun"
)

type row struct {
	Example            string  `json:"example"`
	Engine             string  `json:"engine"`
	PlannedStepMS      float64 `json:"planned_step_ms"`
	MeasuredStepMS     float64 `json:"measured_step_ms"`
	StepErrorPercent   float64 `json:"step_error_percent"`
	RooflineStepMS     float64 `json:"roofline_step_ms"`
	Forecast           string  `json:"forecast"`
	PlannedMiB         float64 `json:"planned_mib"`
	MeasuredMiB        float64 `json:"measured_mib"`
	MemoryErrorPercent float64 `json:"memory_error_percent"`
}

type table struct {
	Note   string `json:"note"`
	Date   string `json:"date"`
	CPU    string `json:"cpu"`
	CPUs   int    `json:"cpus"`
	BLAS   string `json:"blas"`
	Go     string `json:"go"`
	Steps  int    `json:"steps"`
	Load   string `json:"load_before"`
	Rows   []row  `json:"rows"`
	Within string `json:"within_20_percent"`
}

func main() {
	pipe := flag.String("pipe", "bin/pipe", "the pipe binary to run")
	steps := flag.Int("steps", 30, "optimizer steps per run")
	engines := flag.String("engines", "native,torch", "the engines to run, comma-separated")
	only := flag.String("only", "", "the examples to run, comma-separated (empty: all)")
	out := flag.String("out", "bench/steptime.json", "where to write the table (empty: nowhere)")
	flag.Parse()
	if err := run(*pipe, *steps, strings.Split(*engines, ","), *only, *out); err != nil {
		fmt.Fprintln(os.Stderr, "steptime:", err)
		os.Exit(1)
	}
}

func run(pipe string, steps int, engines []string, only, out string) error {
	bin, root, dir, cleanup, err := memrun.Workspace(pipe, "pipe-steptime-")
	if err != nil {
		return err
	}
	defer cleanup()
	t := table{Note: "the plan's forecast step against the run's measured step (training seconds over steps, by the clock), CPU",
		Date: time.Now().UTC().Format(time.DateOnly), CPU: memrun.CPUName(), CPUs: runtime.NumCPU(), BLAS: native.BLASKernels(),
		Go: runtime.Version(), Steps: steps, Load: memrun.LoadAvg()}
	fmt.Printf("%s, %d CPUs, %s\n", t.CPU, t.CPUs, t.BLAS)
	fmt.Printf("%-18s %-7s %10s %10s %8s %10s %10s %10s %8s\n", "example", "engine", "plan ms", "meas ms", "error", "roof ms", "plan MiB", "meas MiB", "error")
	paths, _ := filepath.Glob(filepath.Join(root, "examples", "*.pipe"))
	var in, all int
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".pipe")
		if only != "" && !slices.Contains(strings.Split(only, ","), name) {
			continue
		}
		for _, e := range engines {
			r, err := measure(bin, dir, p, e, steps)
			if err != nil {
				return err
			}
			t.Rows = append(t.Rows, r)
			fmt.Printf("%-18s %-7s %10.1f %10.1f %+7.1f%% %10.1f %10.1f %10.1f %+7.1f%%\n", r.Example, r.Engine, r.PlannedStepMS, r.MeasuredStepMS,
				r.StepErrorPercent, r.RooflineStepMS, r.PlannedMiB, r.MeasuredMiB, r.MemoryErrorPercent)
			if r.PlannedStepMS > 0 {
				all++
				if math.Abs(r.StepErrorPercent) <= 20 {
					in++
				}
			}
		}
	}
	t.Within = fmt.Sprintf("%d of %d forecasts", in, all)
	fmt.Printf("within 20%%: %s\n", t.Within)
	if out == "" {
		return nil
	}
	return memrun.WriteJSON(out, t)
}

// measure runs one example on one engine with a fresh forecast cache;
// the torch engine's forecast is its first run's step, so it runs twice,
// as does a plan the native engine does not time before a run (a GAN's).
func measure(bin, dir, path, engine string, steps int) (row, error) {
	cache, err := os.MkdirTemp(dir, "cache-")
	if err != nil {
		return row{}, err
	}
	defer os.RemoveAll(cache)
	env := []string{"XDG_CACHE_HOME=" + cache}
	args := []string{"--engine", engine}
	if engine == "torch" {
		if _, err := memrun.Run(bin, env, dir, path, max(steps, 20), args...); err != nil {
			return row{}, err
		}
	}
	r, err := memrun.Run(bin, env, dir, path, steps, args...)
	if err == nil && r.ForecastSource == "" && strings.Contains(r.ForecastMissing, "first run") {
		// A plan not timed before a run (a GAN's) is forecast from its
		// first run: this one, of the same steps, then the one measured.
		r, err = memrun.Run(bin, env, dir, path, steps, args...)
	}
	if err != nil {
		return row{}, err
	}
	out := row{Example: r.Example, Engine: engine, PlannedStepMS: ms(r.PlannedStep), MeasuredStepMS: ms(r.MeasuredStep), RooflineStepMS: ms(r.RooflineStep),
		Forecast: r.ForecastSource, PlannedMiB: mib(r.Planned), MeasuredMiB: mib(r.Measured), MemoryErrorPercent: math.Round(1000*r.Error()) / 10}
	if out.Forecast == "" {
		out.Forecast = "none: " + r.ForecastMissing
	}
	if r.PlannedStep > 0 && r.MeasuredStep > 0 {
		out.StepErrorPercent = math.Round(1000*(r.PlannedStep-r.MeasuredStep)/r.MeasuredStep) / 10
	}
	return out, nil
}

func ms(s float64) float64 { return math.Round(s*1e4) / 10 }
func mib(b int64) float64  { return math.Round(float64(b)/(1<<20)*10) / 10 }
