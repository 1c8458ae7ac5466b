package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"pipe/exec/costs"
	"pipe/lang/diag"
	"pipe/lang/render"
	"pipe/planner"
	"pipe/planner/plan"
)

func init() {
	register(&command{name: "plan", usage: "pipe plan [flags] FILE",
		summary: "memory per layer and every automatic choice, before any compute (--device, --batch, --json, --out)", run: runPlan})
}

// hostInfo measures the machine; tests replace it so that no output
// depends on the machine that runs them.
var hostInfo = planner.DetectHost

func runPlan(a *app, args []string) int {
	fs := a.newFlags("plan")
	device := fs.String("device", "", "plan for this device instead of the file's (pipe devices lists them)")
	batch := fs.Int64("batch", 0, "check whether this batch fits, whatever the file says")
	ef := engineFlags(fs)
	asJSON := fs.Bool("json", false, "write the plan as JSON on standard output instead of the table")
	out := fs.String("out", "", "also write the plan's JSON to this file, for pipe run")
	serving := fs.Bool("serve", false, "also plan pipe serve when the file has no serve block (every choice auto)")
	files, err := parseFlags(fs, args)
	if err != nil {
		return exitErrors
	}
	if len(files) != 1 {
		fmt.Fprintln(a.env.Stderr, "usage: pipe plan [--device NAME] [--engine auto|native|torch] [--nproc-per-node N] [--nnodes N] [--batch N] [--serve] [--json] [--out FILE] FILE")
		return exitErrors
	}
	if msg := ef.check(); msg != "" {
		fmt.Fprintln(a.env.Stderr, "pipe plan: "+msg)
		return exitErrors
	}
	if *batch < 1 && isSet(fs, "batch") {
		fmt.Fprintf(a.env.Stderr, "pipe plan: --batch %d: a batch is at least 1\n", *batch)
		return exitErrors
	}
	prog, _, src, display, ds, err := a.load(files[0])
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe plan: %v\n", err)
		return exitErrors
	}
	sources := render.Sources{display: src}
	// With --json, a file that cannot be planned gives its diagnostics as
	// JSON on standard output (what pipe check --json writes), and a plan
	// gives its warnings as JSON on standard error.
	report := func(ds diag.Diagnostics, noPlan bool) {
		switch {
		case !*asJSON:
			a.printDiags(ds, sources)
		case noPlan:
			_ = render.JSON(a.env.Stdout, ds)
		case len(ds) > 0:
			_ = render.JSON(a.env.Stderr, ds)
		}
	}
	if ds.HasErrors() {
		report(ds, true)
		return exitErrors
	}
	// The sources are counted first: a raster source loads GDAL's
	// drivers, which the process's runtime, measured with the host,
	// then includes (planner/process.go).
	samples := samplesOption(prog)
	opts := []planner.Option{planner.WithCosts(costs.Engines()...), planner.WithSource(src), planner.WithHost(hostInfo())}
	if *device != "" {
		opts = append(opts, planner.WithDevice(*device))
	}
	if *batch > 0 {
		opts = append(opts, planner.WithBatch(*batch))
	}
	opts = append(opts, ef.options(nil)...)
	opts = append(opts, samples...)
	if *serving {
		opts = append(opts, planner.WithServe())
	}
	p, pds := planner.Plan(prog, opts...)
	all := append(ds, pds...)
	if p == nil || hasOtherErrors(pds) {
		report(all, true)
		return exitErrors
	}
	report(all, false)
	if *out != "" {
		b, err := p.MarshalIndent()
		if err == nil {
			err = writeFileAtomic(*out, b)
		}
		if err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe plan: %v\n", err)
			return exitErrors
		}
	}
	if *asJSON {
		if err := p.Encode(a.env.Stdout); err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe plan: %v\n", err)
			return exitErrors
		}
	} else {
		writePlan(a.env.Stdout, p)
	}
	if !p.Fits || pds.HasErrors() {
		return exitNoFit
	}
	return exitOK
}

// hasOtherErrors reports an error that is not "does not fit".
func hasOtherErrors(ds diag.Diagnostics) bool {
	for _, d := range ds.Errs() {
		if d.Code != planner.CodeNoFit {
			return true
		}
	}
	return false
}

// writePlan prints the per-layer table, the memory and the decisions.
func writePlan(w io.Writer, p *plan.Plan) {
	fmt.Fprintf(w, "%s: model %s on %s (%s engine), %s, batch %d", p.File, p.Model, p.Device.Name, p.EngineName(),
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
	fmt.Fprintf(w, "\n%s parameters, %s FLOPs per sample forward\n\n", planner.FormatCount(p.Parameters), planner.FormatCount(p.FLOPsPerSample))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINE\tNAME\tOP\tOUTPUT\tPARAMS\tACTIVATIONS\tRECOMPUTED\tFUSED WITH")
	kinds := map[int]string{}
	for _, g := range p.Fusion.Groups {
		kinds[g.ID] = fmt.Sprintf("#%d %s", g.ID, g.Kind)
	}
	for _, l := range p.Layers {
		rc := ""
		if l.Recomputed {
			rc = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Line, l.Name, l.Op, shape(l.Out), planner.FormatCount(l.Params),
			planner.FormatBytes(l.ActivationBytes), rc, kinds[l.FusionGroup])
	}
	tw.Flush()

	m := p.Memory
	per := ""
	if p.WorldSize() > 1 {
		per = ", per device"
	}
	fmt.Fprintf(w, "\nMemory at batch %d (%s engine%s)\n", p.BatchSize, p.EngineName(), per)
	if len(m.Terms) > 0 {
		writeGPUMemory(w, p)
	} else {
		writeMemory(w, p)
	}

	writeGAN(w, p)
	writeServe(w, p)

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

// writeMemory prints the memory's components, which add up to its total.
func writeMemory(w io.Writer, p *plan.Plan) {
	m := p.Memory
	// Names to the left, sizes to the right, so that the sizes line up
	// on their units.
	type memRow struct{ name, size, note string }
	var rows []memRow
	row := func(name string, v int64, note string) {
		rows = append(rows, memRow{name, planner.FormatBytes(v), note})
	}
	row("parameters", m.Parameters, p.Precision.Compute+" working copy")
	if m.Master > 0 {
		row("master weights", m.Master, "fp32")
	}
	row("gradients", m.Gradients, "fp32")
	row("optimizer state", m.Optimizer, fmt.Sprintf("%s, %s", p.Optimizer.Kind, count(p.Optimizer.StateBuffers, "buffer", "buffers")))
	note := "saved for backward, " + p.Precision.Activations
	if len(p.Checkpoint.Segments) > 0 {
		note += fmt.Sprintf(", %s before checkpointing", planner.FormatBytes(m.ActivationsBefore))
	}
	row("activations", m.Activations, note)
	cpu := p.EngineName() == plan.EngineNative
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
	if cpu {
		row("input batch", m.Input, "the model's copy of the inputs")
	} else {
		row("input batch", m.Input, "inputs and targets")
	}
	if m.Loader > 0 {
		note := fmt.Sprintf("%s × %s", count(p.Loader.Workers, "worker", "workers"), count(p.Loader.Prefetch, "batch", "batches"))
		if cpu {
			note = fmt.Sprintf("(%d × %d + 2) batches, training and evaluation", p.Loader.Workers, p.Loader.Prefetch)
		}
		row("loader buffers", m.Loader, note)
	}
	if m.Runtime > 0 {
		row("runtime", m.Runtime, "the process's code, libraries and Go runtime")
	}
	if m.Data > 0 {
		row("data", m.Data, "the sources' samples as they are held")
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
	nameW, sizeW := 0, 0
	for _, r := range rows {
		nameW, sizeW = max(nameW, len(r.name)), max(sizeW, len(r.size))
	}
	for _, r := range rows {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-*s  %*s  %s", nameW, r.name, sizeW, r.size, r.note), " "))
	}
	writeFits(w, p)
}

func writeFits(w io.Writer, p *plan.Plan) {
	m := p.Memory
	if p.Fits {
		fmt.Fprintf(w, "  fits: %s of the budget\n", percent(m.Total, m.Budget))
	} else {
		fmt.Fprintf(w, "  DOES NOT FIT: %s over the budget\n", planner.FormatBytes(m.Total-m.Budget))
	}
}

// writeGPUMemory prints a GPU plan's terms, each with the phases it is
// live in and its source, then each phase's peak: the total is the
// largest phase, not the sum of the lines.
func writeGPUMemory(w io.Writer, p *plan.Plan) {
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
	writeFits(w, p)
}

func shape(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// percent renders part/whole as a percentage that is never "0%" for a
// part that is not zero.
func percent(part, whole int64) string {
	p := 100 * float64(part) / float64(max(whole, 1))
	if part > 0 && p < 1 {
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", p)
}

// count renders "1 worker" or "3 workers".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
