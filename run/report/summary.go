package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"pipe/engine"
	"pipe/planner"
	"pipe/run"
)

// Summary prints what a run did, in a few lines: how far it trained and
// how fast, the final scores, the memory against the plan, and where its
// files are.
func Summary(w io.Writer, res *run.Result, reportPath, curvePath string) {
	wall := Duration(time.Duration(res.WallSeconds * float64(time.Second)))
	switch res.Status {
	case run.StatusSkipped:
		fmt.Fprintf(w, "%s: model %s not trained (--skip-train), evaluated in %s\n", res.Pipeline, res.Model, wall)
	case run.StatusCompleted:
		fmt.Fprintf(w, "%s: trained %d/%d epochs, %s", res.Pipeline, res.Epochs, res.EpochsPlanned, steps(res.Position.Step))
		speed(w, res, wall)
	default:
		fmt.Fprintf(w, "%s: %s after %s (%d/%d epochs)", res.Pipeline, statusWord(res.Status), steps(res.Position.Step), res.Epochs, res.EpochsPlanned)
		speed(w, res, wall)
	}
	if f := res.Final; f != nil {
		fmt.Fprintf(w, "  %s (%s, %s): loss %s", f.Source, f.Part, count(int64(f.Samples), "sample"), Num(f.Loss))
		if res.TargetScaling != nil {
			fmt.Fprint(w, " (standardised target)")
		}
		for _, m := range f.Metrics {
			fmt.Fprintf(w, ", %s %s", m.Name, Num(m.Value))
		}
		fmt.Fprintln(w)
		if len(f.Baseline) > 0 {
			fmt.Fprint(w, "  baseline (predict the mean")
			if s := res.TargetScaling; s != nil && len(s.Mean) == 1 {
				fmt.Fprintf(w, ", %.4g", s.Mean[0])
			}
			fmt.Fprint(w, "):")
			for i, m := range f.Baseline {
				if i > 0 {
					fmt.Fprint(w, ",")
				}
				fmt.Fprintf(w, " %s %s", m.Name, Num(m.Value))
			}
			fmt.Fprintln(w)
		}
	}
	if q := res.Int8; q != nil {
		fmt.Fprintf(w, "  int8: %d layers quantised (%s weights, %s in fp32), activations calibrated on %s (%s), %s kernel\n",
			q.Int8Layers(), Bytes(q.WeightBytesInt8), Bytes(q.WeightBytesFP32), count(int64(q.CalibSamples), "sample"), q.Calibration, q.Kernel)
	}
	if len(res.Applied) > 0 {
		keys := make([]string, 0, len(res.Applied))
		for k := range res.Applied {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(w, "  engine: %s, %s", res.Engine, res.Precision)
		for _, k := range keys {
			fmt.Fprintf(w, "; %s %s", k, res.Applied[k])
		}
		fmt.Fprintln(w)
	}
	stepTime(w, res)
	if d := res.Memory.Device; len(d) > 0 {
		for _, dm := range d {
			deviceMemory(w, res.Memory, dm)
		}
	} else if m := res.Memory; m.NotMeasured != "" {
		fmt.Fprintf(w, "  memory: %s planned; not measured, as %s\n", Bytes(m.Estimated), m.NotMeasured)
	} else if m := res.Memory; m.Measured > 0 {
		fmt.Fprintf(w, "  memory: %s planned, %s measured (%s): %s; the model and loaders account for %s of it\n",
			Bytes(m.Estimated), Bytes(m.Measured), m.MeasuredBy, estimateError(m.Estimated, m.Measured), Bytes(m.Accounted))
	}
	if res.Checkpoint != "" {
		fmt.Fprintf(w, "  checkpoint: %s\n", res.Checkpoint)
	}
	for _, p := range res.Predictions {
		fmt.Fprintf(w, "  predictions: %s (%s, %d %s)\n", p.Path, p.Format, p.Samples, map[bool]string{true: "windows", false: "samples"}[p.Format == "geotiff"])
	}
	if reportPath != "" {
		fmt.Fprintf(w, "  report: %s", reportPath)
		if curvePath != "" {
			fmt.Fprintf(w, ", loss curve: %s", curvePath)
		}
		fmt.Fprintln(w)
	}
}

// deviceMemory says one device's memory against the plan's, like with
// like: the allocator's reserved peak against the plan's reserved
// figure, and the device's used memory against the plan's total, which
// holds the CUDA context. A plan without phases (a device block's linear
// model) prices the allocator's memory alone.
func deviceMemory(w io.Writer, m run.Memory, dm engine.DeviceMemory) {
	est := Bytes(m.Estimated)
	switch {
	case dm.MaxReserved > 0 && m.EstimatedReserved > 0:
		fmt.Fprintf(w, "  memory on %s (rank %d): %s reserved, %s allocated at the peak (torch.cuda), %s reserved planned: %s",
			dm.Device, dm.Rank, Bytes(dm.MaxReserved), Bytes(dm.MaxAllocated), Bytes(m.EstimatedReserved), estimateError(m.EstimatedReserved, dm.MaxReserved))
		if dm.Total > 0 {
			fmt.Fprintf(w, "; the device has %s of %s in use, %s planned with the CUDA context: %s",
				Bytes(dm.Used), Bytes(dm.Total), est, estimateError(m.Estimated, dm.Used))
		}
		fmt.Fprintln(w)
	case dm.MaxReserved > 0:
		fmt.Fprintf(w, "  memory on %s (rank %d): %s reserved, %s allocated at the peak (torch.cuda), %s planned: %s",
			dm.Device, dm.Rank, Bytes(dm.MaxReserved), Bytes(dm.MaxAllocated), est, estimateError(m.Estimated, dm.MaxReserved))
		if dm.Total > 0 {
			fmt.Fprintf(w, "; the device has %s of %s in use", Bytes(dm.Used), Bytes(dm.Total))
		}
		fmt.Fprintln(w)
	case dm.AtExit && dm.Measured() == 0:
		host := ""
		if dm.MaxRSS > 0 {
			host = fmt.Sprintf(" (its process peaked at %s of host memory)", Bytes(dm.MaxRSS))
		}
		fmt.Fprintf(w, "  memory on %s (rank %d): not measured, as the torch worker exited first%s, %s planned\n",
			dm.Device, dm.Rank, host, est)
	case dm.AtExit:
		fmt.Fprintf(w, "  memory on %s (rank %d): the torch worker's peak resident memory was %s at its exit (the kernel's figure, the PyTorch libraries included), %s planned for the step: %s\n",
			dm.Device, dm.Rank, Bytes(dm.MaxRSS), est, estimateError(m.Estimated, dm.MaxRSS))
	default:
		fmt.Fprintf(w, "  memory on %s (rank %d): the torch worker's peak resident memory is %s (the OS's figure, the PyTorch libraries included), %s planned for the step: %s\n",
			dm.Device, dm.Rank, Bytes(dm.MaxRSS), est, estimateError(m.Estimated, dm.MaxRSS))
	}
}

func speed(w io.Writer, res *run.Result, wall string) {
	if res.SamplesTrained > 0 {
		fmt.Fprintf(w, " in %s (%.0f samples/s)", wall, res.SamplesPerSecond)
	}
	fmt.Fprintln(w)
}

// stepTime prints the step's time as measured against the plan's
// forecast and its roofline (at the device's peak rates, assumed for a
// local CPU).
func stepTime(w io.Writer, res *run.Result) {
	m := res.StepSeconds()
	if m <= 0 {
		return
	}
	fmt.Fprintf(w, "  step time: %s measured", planner.FormatSeconds(m))
	switch f := res.Forecast; {
	case f != nil && f.StepSeconds > 0:
		fmt.Fprintf(w, ", %s forecast (%s): %+.1f%%", planner.FormatSeconds(f.StepSeconds), f.Source, 100*(f.StepSeconds-m)/m)
	case f != nil && f.Missing != "":
		fmt.Fprintf(w, ", no forecast (%s)", f.Missing)
	}
	if r := res.RooflineStepSeconds; r > 0 {
		fmt.Fprintf(w, "; roofline %s", planner.FormatSeconds(r))
	}
	fmt.Fprintln(w)
}

// steps renders "1 step" or "20 steps".
func steps(n int64) string { return count(n, "step") }

// count renders n of a thing: "1 sample", "20 samples".
func count(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func statusWord(s run.Status) string {
	switch s {
	case run.StatusMaxSteps:
		return "stopped at the step limit"
	case run.StatusInterrupted:
		return "interrupted"
	case run.StatusNonFinite:
		return "stopped by a non-finite loss"
	}
	return string(s)
}

// Bytes formats a byte count with binary units.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// Num writes a loss or a metric: four decimals as a rule (0.9219,
// 11.8700), four significant digits where those would mislead: a
// diverged loss of 1.6e39 or an error of 3.9e19, and values under 1e-4.
func Num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Sprint(v)
	case a != 0 && (a >= 1e5 || a < 1e-4):
		return fmt.Sprintf("%.4g", v)
	}
	return fmt.Sprintf("%.4f", v)
}

// estimateError says how far an estimate is from what was measured.
func estimateError(est, measured int64) string {
	if est <= 0 || measured <= 0 {
		return "no estimate"
	}
	e := 100 * float64(est-measured) / float64(measured)
	switch {
	case e >= 0.05:
		return fmt.Sprintf("the plan is %.1f%% over", e)
	case e <= -0.05:
		return fmt.Sprintf("the plan is %.1f%% short", -e)
	}
	return "the plan is exact"
}
