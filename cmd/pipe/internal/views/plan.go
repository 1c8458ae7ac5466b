package views

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"pipe/planner"
	"pipe/planner/cost"
	"pipe/planner/plan"
)

// engineLabel is the plan's engine as its first line names it, with the
// worker library's version a GPU plan is priced for ("assumed" when no
// worker was asked).
func engineLabel(p *plan.Plan) string {
	eng := p.EngineName() + " engine"
	if t := p.Engine.Torch; t != "" {
		eng += ", torch " + t
		if p.Engine.VersionAssumed {
			eng += " assumed"
		}
	}
	return eng
}

// Plan prints the per-layer table, the memory and the decisions.
func Plan(w io.Writer, p *plan.Plan) {
	fmt.Fprintf(w, "%s: model %s on %s (%s), %s, batch %d", p.File, p.Model, p.Device.Name, engineLabel(p),
		p.Precision.Compute, p.BatchSize)
	if ws := p.WorldSize(); ws > 1 {
		fmt.Fprintf(w, " per device × %d devices", ws)
	}
	if p.AccumulationSteps > 1 {
		fmt.Fprintf(w, " × %d accumulation steps", p.AccumulationSteps)
	}
	if p.AccumulationSteps > 1 || p.WorldSize() > 1 {
		fmt.Fprintf(w, " = %d", p.EffectiveBatch)
	}
	fmt.Fprintf(w, "\n%s parameters, %s FLOPs per sample forward\n", planner.FormatCount(p.Parameters), planner.FormatCount(p.FLOPsPerSample))
	if len(p.Overrides) > 0 {
		fmt.Fprintf(w, "with --set %s\n", strings.Join(p.Overrides, " --set "))
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// A GPU plan prices each convolution's cuDNN workspace: a column.
	ws := slices.ContainsFunc(p.Layers, func(l plan.Layer) bool { return l.Workspace != "" })
	head := "LINE\tNAME\tOP\tOUTPUT\tPARAMS\tACTIVATIONS\tRECOMPUTED\tFUSED WITH"
	if ws {
		head = "LINE\tNAME\tOP\tOUTPUT\tPARAMS\tACTIVATIONS\tWORKSPACE\tRECOMPUTED\tFUSED WITH"
	}
	fmt.Fprintln(tw, head)
	kinds := map[int]string{}
	for _, g := range p.Fusion.Groups {
		kinds[g.ID] = fmt.Sprintf("#%d %s", g.ID, g.Kind)
	}
	for _, l := range p.Layers {
		rc := ""
		if l.Recomputed {
			rc = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t", l.Line, l.Name, l.Op, shape(l.Out), planner.FormatCount(l.Params),
			planner.FormatBytes(l.ActivationBytes))
		if ws {
			if l.Workspace != "" {
				fmt.Fprintf(tw, "%s\t", planner.FormatBytes(l.WorkspaceBytes))
			} else {
				fmt.Fprint(tw, "\t")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", rc, kinds[l.FusionGroup])
	}
	tw.Flush()

	m := p.Memory
	per := ""
	if p.WorldSize() > 1 {
		per = ", per device"
	}
	fmt.Fprintf(w, "\nMemory at batch %d (%s engine%s)\n", p.BatchSize, p.EngineName(), per)
	if len(m.Terms) > 0 {
		gpuMemory(w, p)
	} else {
		memory(w, p)
	}

	gan(w, p)
	serving(w, p)
	forecast(w, p)

	if len(p.Checkpoint.Segments) > 0 {
		fmt.Fprintf(w, "\nRecomputed segments (+%.1f%% FLOPs)\n", p.Checkpoint.ExtraPercent)
		for _, s := range p.Checkpoint.Segments {
			fmt.Fprintf(w, "  %s .. %s (%d nodes)\n", s.First, s.Last, s.To-s.From+1)
		}
	}

	fmt.Fprintln(w, "\nDecisions")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range p.Decisions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.What, d.Value, d.Reason)
	}
	tw.Flush()
}

// forecast prints the plan's time on this machine: the forecast's step,
// epoch and training, beside the roofline, which is a lower bound only
// where the device's peak rates are its own (a local CPU's are assumed).
func forecast(w io.Writer, p *plan.Plan) {
	f, roof := p.Forecast, p.StepTime.Roofline()
	if f == nil && p.StepTime.HostSeconds <= 0 {
		return
	}
	defer hostFloor(w, p.StepTime, p.StepsPerCommand)
	fmt.Fprintf(w, "\nTime (%s engine on %s)\n", p.EngineName(), p.Device.Name)
	if f == nil || f.StepSeconds <= 0 {
		if f != nil {
			fmt.Fprintf(w, "  not forecast: %s\n", f.Missing)
		}
		if roof > 0 {
			fmt.Fprintf(w, "  roofline      %s a step at the device's peak rates (pipe devices says where they are assumed)\n", planner.FormatSeconds(roof))
		}
		return
	}
	fmt.Fprintf(w, "  step          %s  (%s)\n", planner.FormatSeconds(f.StepSeconds), f.Source)
	if f.EpochSeconds > 0 {
		fmt.Fprintf(w, "  estimated epoch time %s: %d steps", planner.FormatSeconds(f.EpochSeconds), f.StepsPerEpoch)
		if f.ValidationBatches > 0 {
			fmt.Fprintf(w, " and %d validation batches of %s", f.ValidationBatches, planner.FormatSeconds(f.EvalBatchSeconds))
		}
		if f.EvalBatchSeconds > 0 {
			fmt.Fprintln(w, ", the loader and checkpoints left out")
		} else {
			fmt.Fprintln(w, ", validation and checkpoints left out")
		}
	}
	if f.TotalSeconds > 0 {
		fmt.Fprintf(w, "  %d epochs      %s\n", f.Epochs, planner.FormatSeconds(f.TotalSeconds))
	}
	if roof > 0 {
		fmt.Fprintf(w, "  roofline      %s a step at the device's peak rates (pipe devices says where they are assumed): %.2f× the forecast\n", planner.FormatSeconds(roof), roof/f.StepSeconds)
	}
}

// hostFloor prints the engine's host floor beside the roofline, and the
// plan's step that takes both, with which bound it is.
func hostFloor(w io.Writer, st plan.StepTime, k int64) {
	if st.HostSeconds <= 0 {
		return
	}
	how := "added to the roofline: the CPU computes on the host's cores"
	if st.HostOverlaps {
		how = "the longer of it and the roofline: the device computes while the host prepares the next step"
	}
	fmt.Fprintf(w, "  host floor    %s a step at %d steps a command (%s a step, %s a command; %s)\n",
		planner.FormatSeconds(st.HostSeconds), max(k, 1), planner.FormatSeconds(st.HostStepSeconds), planner.FormatSeconds(st.HostCommandSeconds), st.HostSource)
	fmt.Fprintf(w, "  plan's step   %s, %s-bound (%s)\n", planner.FormatSeconds(st.StepSeconds), st.Bound, how)
}

// memRow is a line of the memory's table: a component, its size and
// what it is.
type memRow struct{ name, size, note string }

// memory prints the memory's components, which add up to its total:
// names to the left, sizes to the right, so that the sizes line up on
// their units.
func memory(w io.Writer, p *plan.Plan) {
	rows := memoryRows(p)
	nameW, sizeW := 0, 0
	for _, r := range rows {
		nameW, sizeW = max(nameW, len(r.name)), max(sizeW, len(r.size))
	}
	for _, r := range rows {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-*s  %*s  %s", nameW, r.name, sizeW, r.size, r.note), " "))
	}
	fits(w, p)
}

// memoryRows are the lines of a plan's memory without per-phase terms,
// down to its total and budget.
func memoryRows(p *plan.Plan) []memRow {
	m := p.Memory
	var rows []memRow
	row := func(name string, v int64, note string) {
		rows = append(rows, memRow{name, planner.FormatBytes(v), note})
	}
	row("parameters", m.Parameters, p.Precision.Compute+" working copy")
	if m.Master > 0 {
		row("master weights", m.Master, "fp32")
	}
	row("gradients", m.Gradients, "fp32")
	row("optimizer state", m.Optimizer, fmt.Sprintf("%s, %s", p.Optimizer.Kind, Count(p.Optimizer.StateBuffers, "buffer", "buffers")))
	note := "saved for backward, " + p.Precision.Activations
	if len(p.Checkpoint.Segments) > 0 {
		note += fmt.Sprintf(", %s before checkpointing", planner.FormatBytes(m.ActivationsBefore))
	}
	row("activations", m.Activations, note)
	tr := engineTraits(p.EngineName())
	cpu := tr.InProcess
	if m.ActivationGradients > 0 {
		row("activation grads", m.ActivationGradients, "live at the backward pass's peak")
	}
	if cpu {
		row("workspace", m.Workspace, "per-thread im2col scratch")
	} else {
		row("workspace", m.Workspace, "largest op")
	}
	if m.Eval > 0 {
		row("evaluation", m.Eval, "the evaluation forward pass")
	}
	switch {
	case cpu:
		row("input batch", m.Input, "the model's copy of the inputs")
	case m.Runtime > 0:
		// The torch worker on the CPU: its input slots in shared memory.
		row("input batch", m.Input, "inputs and targets, the worker's 3 slots")
	default:
		row("input batch", m.Input, "inputs and targets")
	}
	if m.Loader > 0 {
		note := fmt.Sprintf("%s × %s", Count(p.Loader.Workers, "worker", "workers"), Count(p.Loader.Prefetch, "batch", "batches"))
		if tr.LoaderInBudget {
			note = fmt.Sprintf("(%d × %d + 2) batches, training and evaluation", p.Loader.Workers, p.Loader.Prefetch)
		}
		row("loader buffers", m.Loader, note)
	}
	if m.Runtime > 0 {
		what := "the process's code, libraries and Go runtime"
		if !cpu {
			what = "the torch worker: Python, PyTorch and its allocator"
		}
		row("runtime", m.Runtime, what)
	}
	if m.Data > 0 {
		row("data", m.Data, "the sources' samples as they are held")
	}
	if m.DeviceData > 0 {
		row("device data", m.DeviceData, "the training set's samples, gathered there by index")
	}
	if m.Checkpoint > 0 {
		row("checkpoint copy", m.Checkpoint, "the state a checkpoint is written from")
	}
	if m.Headroom > 0 {
		row("gc headroom", m.Headroom, "garbage under the Go runtime's soft limit")
	}
	if p.GAN != nil {
		row("discriminator", p.GAN.Memory.Total, p.GAN.Discriminator+": see below")
	}
	total := ""
	if cpu && m.Runtime > 0 {
		total = "the process's peak resident memory"
	}
	row("total", m.Total, total)
	budgetNote := fmt.Sprintf("%s less %.0f%%", planner.FormatBytes(m.Capacity), m.MarginPercent)
	if m.Reserve > 0 {
		budgetNote += " and " + planner.FormatBytes(m.Reserve)
	}
	row("budget", m.Budget, budgetNote)
	return rows
}

func fits(w io.Writer, p *plan.Plan) {
	m := p.Memory
	if p.Fits {
		fmt.Fprintf(w, "  fits: %s of the budget\n", Percent(m.Total, m.Budget))
	} else {
		fmt.Fprintf(w, "  DOES NOT FIT: %s over the budget\n", planner.FormatBytes(m.Total-m.Budget))
	}
}

// gpuMemory prints a GPU plan's terms, each with the phases it is
// live in and its source, then each phase's peak: the total is the
// largest phase, not the sum of the lines.
func gpuMemory(w io.Writer, p *plan.Plan) {
	m := p.Memory
	short := map[string]string{plan.PhaseForward: "F", plan.PhaseBackward: "B", plan.PhaseOptimizer: "O"}
	nameW, sizeW := len("term"), 0
	for _, t := range m.Terms {
		nameW, sizeW = max(nameW, len(t.Name)), max(sizeW, len(planner.FormatBytes(t.Bytes)))
	}
	fmt.Fprintf(w, "  %-*s  %*s  %-6s  %-11s  %s\n", nameW, "term", sizeW, "size", "phases", "source", "basis")
	for _, t := range m.Terms {
		ph, basis := "", t.Basis
		for _, n := range t.Phases {
			ph += short[n]
		}
		if t.Outside {
			basis = "outside the allocator: " + basis
		}
		fmt.Fprintf(w, "  %-*s  %*s  %-6s  %-11s  %s\n", nameW, t.Name, sizeW, planner.FormatBytes(t.Bytes), ph, t.Source, basis)
	}
	fmt.Fprintln(w, "  phases (F end of forward, B backward peak, O optimizer step): allocated / reserved / on the device")
	for _, ph := range m.Phases {
		mark := ""
		if ph.Name == m.PeakPhase {
			mark = "  <- peak"
		}
		fmt.Fprintf(w, "    %-9s %10s / %10s / %10s%s\n", ph.Name, planner.FormatBytes(ph.Allocated), planner.FormatBytes(ph.Reserved), planner.FormatBytes(ph.Device), mark)
	}
	fmt.Fprintf(w, "  total     %s  the %s phase on the device (max_memory_reserved plus what is outside the allocator)\n", planner.FormatBytes(m.Total), m.PeakPhase)
	fmt.Fprintf(w, "  budget    %s  %s less %.0f%%\n", planner.FormatBytes(m.Budget), planner.FormatBytes(m.Capacity), m.MarginPercent)
	fits(w, p)
}

func shape(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Percent renders part/whole as a percentage that is never "0%" for a
// part that is not zero.
func Percent(part, whole int64) string {
	p := 100 * float64(part) / float64(max(whole, 1))
	if part > 0 && p < 1 {
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", p)
}

// Count renders "1 worker" or "3 workers".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// engineTraits is what the engine named name says of itself (none for an
// engine not linked in).
func engineTraits(name string) cost.Traits {
	for _, e := range cost.Registered() {
		if e.Name() == name {
			return e.Traits()
		}
	}
	return cost.Traits{}
}
