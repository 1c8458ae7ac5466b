package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"pipe/run"
)

// ProfileTable prints a profile: for the training steps (else the
// evaluation batches), one row per kernel, the most expensive first, with
// its forward and backward milliseconds per micro-batch as the clock
// measured them, its share of the step, the plan's roofline estimate, the
// FLOP rate achieved and measured over estimated; then the loss, the
// update, the loader's wait, what no span covers, and the whole step
// against the plan.
func ProfileTable(w io.Writer, p *run.Profile) {
	if p == nil {
		return
	}
	if t := p.Train; t != nil && t.Steps > 0 && t.MicroBatches > 0 {
		phaseTable(w, p, "training", t)
		if e := p.Eval; e != nil && e.Steps > 0 {
			fmt.Fprintf(w, "evaluation: %s of up to %d, %.3f ms each against %.3f ms estimated (%s); the report has its layers\n",
				batches(e.Steps), p.Batch, 1e3*e.Seconds/float64(e.Steps), 1e3*e.EstimatedSeconds/float64(e.Steps), ratioOf(e.Seconds, e.EstimatedSeconds))
		}
		return
	}
	if e := p.Eval; e != nil && e.Steps > 0 && e.MicroBatches > 0 {
		phaseTable(w, p, "evaluation", e)
	}
}

func phaseTable(w io.Writer, p *run.Profile, name string, pp *run.PhaseProfile) {
	train := name == "training"
	unit := "step"
	if !train {
		unit = "batch"
	}
	fmt.Fprintf(w, "\nprofile (%s engine, %s): %s after %d warm-up, timed by the clock around each kernel; ms per micro-batch of up to %d\n",
		p.Engine, name, stepsOf(pp.Steps, train), p.Warmup, p.Batch)
	mb := float64(pp.MicroBatches)
	ms := func(s float64) string { return fmt.Sprintf("%.3f", 1e3*s/mb) }
	share := func(s float64) string {
		if pp.Seconds <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*s/pp.Seconds)
	}
	rows := append([]run.LayerProfile(nil), pp.Layers...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Seconds() > rows[j].Seconds() })
	var lines [][]string
	var layers, est float64
	for i, l := range rows {
		bwd := "-"
		if train && l.BackwardSeconds+l.RecomputeSeconds > 0 {
			bwd = ms(l.BackwardSeconds + l.RecomputeSeconds)
		}
		e, gf, ratio := "-", "-", "-"
		if l.EstimatedSeconds() > 0 {
			e = ms(l.EstimatedSeconds())
			ratio = fmt.Sprintf("%.1fx", l.Ratio())
		}
		if l.GFLOPS > 0 {
			gf = fmt.Sprintf("%.2f", l.GFLOPS)
		}
		bound := l.Bound
		if bound == "" {
			bound = "-"
		}
		lines = append(lines, []string{fmt.Sprint(i + 1), l.Name, strings.Join(l.Ops, "+"),
			ms(l.ForwardSeconds), bwd, share(l.Seconds()), e, gf, ratio, bound})
		layers += l.Seconds()
		est += l.EstimatedSeconds()
	}
	lines = append(lines, nil, []string{"", "layers", "", "", "", share(layers), ms(est), "", ratioOf(layers, est), ""},
		[]string{"", "loss", "", ms(pp.LossSeconds), "", share(pp.LossSeconds), "", "", "", ""})
	other := pp.Seconds - layers - pp.LossSeconds
	if train {
		optEst := pp.EstimatedSeconds - est
		lines = append(lines, []string{"", "optimizer", "", "", "", share(pp.OptimizerSeconds), ms(optEst), "", ratioOf(pp.OptimizerSeconds, optEst), ""},
			[]string{"", "loader wait", "", "", "", share(pp.LoaderSeconds), "", "", "", ""})
		other -= pp.OptimizerSeconds + pp.LoaderSeconds
	}
	lines = append(lines, []string{"", "untimed", "", "", "", share(other), "", "", "", ""},
		[]string{"", "whole " + unit, "", fmt.Sprintf("%.3f", 1e3*pp.Seconds/float64(pp.Steps)), "", "100%",
			fmt.Sprintf("%.3f", 1e3*pp.EstimatedSeconds/float64(pp.Steps)), "", ratioOf(pp.Seconds, pp.EstimatedSeconds), ""})
	head := []string{"#", "layer", "ops", "fwd ms", "bwd ms", "share", "est ms", "GFLOP/s", "meas/est", "bound"}
	left := []bool{false, true, true, false, false, false, false, false, false, true}
	width := make([]int, len(head))
	for _, l := range append([][]string{head}, lines...) {
		for i, c := range l {
			width[i] = max(width[i], len(c))
		}
	}
	row := func(l []string) {
		var b strings.Builder
		for i, c := range l {
			if i > 0 {
				b.WriteString("  ")
			}
			if left[i] {
				fmt.Fprintf(&b, "%-*s", width[i], c)
			} else {
				fmt.Fprintf(&b, "%*s", width[i], c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	row(head)
	for _, l := range lines {
		if l == nil {
			continue
		}
		row(l)
	}
	fmt.Fprintf(w, "(fwd, bwd: measured; est: the plan's roofline on %s; whole %s: the clock around it, the loader included)\n", p.Device, unit)
}

func ratioOf(measured, estimate float64) string {
	if estimate <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fx", measured/estimate)
}

func stepsOf(n int, train bool) string {
	if train {
		return steps(int64(n))
	}
	return batches(n)
}

func batches(n int) string {
	if n == 1 {
		return "1 batch"
	}
	return fmt.Sprintf("%d batches", n)
}
