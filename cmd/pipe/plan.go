package main

import (
	"context"
	"flag"
	"fmt"

	"pipe/cmd/pipe/internal/views"
	"pipe/diag"
	"pipe/engine"
	"pipe/lang/render"
	"pipe/planner/plan"
	"pipe/workflow"
)

func init() {
	register(&command{name: "plan", usage: "pipe plan [flags] FILE",
		summary: "memory per layer and every automatic choice, before any compute (--device, --batch, --json, --out)", run: runPlan})
}

// planFlags are pipe plan's flags.
type planFlags struct {
	device  *string
	batch   *int64
	engine  *engineFlagSet
	asJSON  *bool
	out     *string
	serving *bool
	// versions are the engines' version flags (--NAME-version), by
	// engine name.
	versions map[string]*string
	over     *overrideFlags
}

func newPlanFlags(fs *flag.FlagSet) *planFlags {
	return &planFlags{
		device:   fs.String("device", "", "plan for this device instead of the file's (pipe devices lists them)"),
		batch:    fs.Int64("batch", 0, "check whether this batch fits, whatever the file says"),
		engine:   engineFlags(fs),
		asJSON:   fs.Bool("json", false, "write the plan as JSON on standard output instead of the table"),
		out:      fs.String("out", "", "also write the plan's JSON to this file, for pipe run"),
		serving:  fs.Bool("serve", false, "also plan pipe serve when the file has no serve block (every choice auto)"),
		versions: versionFlags(fs),
		over:     newOverrideFlags(fs),
	}
}

// versionFlags defines the version flag of each engine that has one.
func versionFlags(fs *flag.FlagSet) map[string]*string {
	out := map[string]*string{}
	for _, r := range engine.Registered() {
		if r.Version != nil {
			out[r.Name] = fs.String(r.Name+"-version", "", r.Version.Usage)
		}
	}
	return out
}

// versionError says what is wrong with the version flags given, "" when
// nothing.
func (f *planFlags) versionError(fs *flag.FlagSet) string {
	for _, r := range engine.Registered() {
		if v, ok := f.versions[r.Name]; ok && isSet(fs, r.Name+"-version") {
			if err := r.Version.Check(*v); err != nil {
				return "pipe plan: --" + r.Name + "-version: " + err.Error()
			}
		}
	}
	return ""
}

// versionValues are the version flags' values, by engine name.
func (f *planFlags) versionValues() map[string]string {
	out := map[string]string{}
	for name, v := range f.versions {
		out[name] = *v
	}
	return out
}

// check says what is wrong with the flags and files, "" when nothing.
func (f *planFlags) check(fs *flag.FlagSet, files []string) string {
	switch {
	case len(files) != 1:
		return oneFile("plan", files) + "\nusage: pipe plan [--device NAME] [--engine auto|native|torch] [--nproc-per-node N] [--nnodes N] [--network 100Gb/s] [--batch N] [--torch-version V] [--serve] [--set PATH=VALUE]... [--print-config] [--json] [--out FILE] FILE"
	case f.engine.check() != "":
		return "pipe plan: " + f.engine.check()
	case f.versionError(fs) != "":
		return f.versionError(fs)
	case *f.batch < 1 && isSet(fs, "batch"):
		return fmt.Sprintf("pipe plan: --batch %d: a batch is at least 1", *f.batch)
	}
	return ""
}

func runPlan(a *app, args []string) int {
	fs := a.newFlags("plan")
	f := newPlanFlags(fs)
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if msg := f.check(fs, files); msg != "" {
		fmt.Fprintln(a.env.Stderr, msg)
		return exitErrors
	}
	f.over.use(a)
	prog, _, src, display, ds, err := a.load(files[0])
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe plan: %v\n", err)
		return exitErrors
	}
	report := a.planDiags(*f.asJSON, render.Sources{display: src})
	if ds.HasErrors() {
		report(ds, true)
		return exitErrors
	}
	if *f.over.printConfig {
		return a.printConfig(src, display)
	}
	req := workflow.Request{Purpose: workflow.ForPlan, Source: src, Device: *f.device, Batch: *f.batch, Serve: *f.serving, Overrides: a.overrides(), Forecast: true, Versions: f.versionValues()}
	f.engine.request(&req)
	pl, pds := a.workflow("").Plan(context.Background(), prog, req)
	all := append(ds, pds...)
	// A plan the run would refuse for its data is shown, for what it says
	// of the device, but not written, and exits 1.
	refused := workflow.HasDataErrors(pds)
	if pl.Plan == nil || workflow.HasOtherErrors(pds) && !refused {
		report(all, true)
		return exitErrors
	}
	report(all, false)
	out := *f.out
	if refused {
		out = ""
	}
	if !a.writePlan(pl.Plan, out, *f.asJSON) || refused {
		return exitErrors
	}
	if !pl.Plan.Fits || pds.HasErrors() {
		return exitNoFit
	}
	return exitOK
}

// planDiags renders pipe plan's diagnostics. With --json, a file that
// cannot be planned gives its diagnostics as JSON on standard output
// (what pipe check --json writes), and a plan gives its warnings as JSON
// on standard error.
func (a *app) planDiags(asJSON bool, sources render.Sources) func(ds diag.Diagnostics, noPlan bool) {
	return func(ds diag.Diagnostics, noPlan bool) {
		switch {
		case !asJSON:
			a.printDiags(ds, sources)
		case noPlan:
			_ = render.JSON(a.env.Stdout, ds)
		case len(ds) > 0:
			_ = render.JSON(a.env.Stderr, ds)
		}
	}
}

// writePlan writes the plan's JSON to out (when given) and shows the plan
// as JSON or as the table; false when a write failed.
func (a *app) writePlan(p *plan.Plan, out string, asJSON bool) bool {
	if out != "" {
		b, err := p.MarshalIndent()
		if err == nil {
			err = writeFileAtomic(out, b)
		}
		if err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe plan: %v\n", err)
			return false
		}
	}
	if asJSON {
		if err := p.Encode(a.env.Stdout); err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe plan: %v\n", err)
			return false
		}
		return true
	}
	views.Plan(a.env.Stdout, p)
	return true
}
