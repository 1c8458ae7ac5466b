// Command memory holds each example's planned memory to what the OS
// measured: it runs every example on the CPU (the native engine) for a
// few optimizer steps, each as a process of its own, and prints the
// plan's total beside the process's peak resident memory (VmHWM, which the
// run reads from /proc and reports, bounded by wait4's rusage) with the
// error, then writes the table to bench/memory.json, so
// that a change that makes the memory model worse shows in its diff.
// make bench runs it.
//
//	go run ./bench/cmd/memory [-pipe bin/pipe] [-steps 30] [-out bench/memory.json]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"pipe/internal/memrun"
)

type row struct {
	Example       string  `json:"example"`
	PlannedBytes  int64   `json:"planned_bytes"`
	MeasuredBytes int64   `json:"measured_bytes"`
	ErrorPercent  float64 `json:"error_percent"`
}

type table struct {
	Note     string `json:"note"`
	Date     string `json:"date"`
	Go       string `json:"go"`
	Steps    int    `json:"steps"`
	Rows     []row  `json:"rows"`
	WorstAbs string `json:"worst"`
}

func main() {
	pipe := flag.String("pipe", "bin/pipe", "the pipe binary to run")
	steps := flag.Int("steps", 30, "optimizer steps per example")
	out := flag.String("out", "bench/memory.json", "where to write the table (empty: nowhere)")
	flag.Parse()
	if err := run(*pipe, *steps, *out); err != nil {
		fmt.Fprintln(os.Stderr, "memory:", err)
		os.Exit(1)
	}
}

func run(pipe string, steps int, out string) error {
	bin, root, dir, cleanup, err := memrun.Workspace(pipe, "pipe-memory-")
	if err != nil {
		return err
	}
	defer cleanup()
	paths, _ := filepath.Glob(filepath.Join(root, "examples", "*.pipe"))
	t := table{Note: "plan total against the process's peak resident memory (VmHWM), native engine on the CPU",
		Date: time.Now().UTC().Format(time.DateOnly), Go: runtime.Version(), Steps: steps}
	fmt.Printf("%-18s %12s %12s %8s\n", "example", "planned MiB", "measured MiB", "error")
	var worst float64
	for _, p := range paths {
		r, err := memrun.Run(bin, nil, dir, p, steps)
		if err != nil {
			return err
		}
		e := 100 * r.Error()
		fmt.Printf("%-18s %12.1f %12.1f %+7.1f%%\n", r.Example, float64(r.Planned)/(1<<20), float64(r.Measured)/(1<<20), e)
		t.Rows = append(t.Rows, row{r.Example, r.Planned, r.Measured, math.Round(e*10) / 10})
		if math.Abs(e) >= math.Abs(worst) {
			worst, t.WorstAbs = e, fmt.Sprintf("%s %+.1f%%", r.Example, e)
		}
	}
	fmt.Printf("worst: %s\n", t.WorstAbs)
	if out == "" {
		return nil
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}
