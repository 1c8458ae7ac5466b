package main

import (
	"fmt"

	"pipe/diag"
	"pipe/lang"
	"pipe/lang/render"
	"pipe/planner"
	"pipe/stdlib"
)

func runCheck(a *app, args []string) int {
	fs := a.newFlags("check")
	asJSON := fs.Bool("json", false, "write diagnostics as JSON on standard output")
	over := newOverrideFlags(fs)
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	over.use(a)
	if len(files) == 0 {
		fmt.Fprintln(a.env.Stderr, "usage: pipe check [--json] [--set PATH=VALUE]... [--print-config] FILE...")
		return exitErrors
	}
	var all diag.Diagnostics
	sources := render.Sources{}
	failed := false
	for _, name := range files {
		prog, _, src, display, ds, err := a.load(name)
		if err != nil {
			ds = diag.Diagnostics{{Severity: diag.Error, Code: "read", Summary: "cannot read " + display, Detail: err.Error()}}
		} else if !ds.HasErrors() {
			// What pipe plan would refuse on any device.
			ds = append(ds, checkStatic(prog)...)
		}
		sources[display] = src
		if *over.printConfig && err == nil && !ds.HasErrors() {
			if code := a.printConfig(src, display); code != exitOK {
				return code
			}
			continue
		}
		a.log.Debug("checked", "file", display, "diagnostics", len(ds))
		if ds.HasErrors() {
			failed = true
		}
		all = append(all, ds...)
	}
	if *asJSON {
		if err := render.JSON(a.env.Stdout, all); err != nil {
			return exitErrors
		}
	} else {
		a.printDiags(all, sources)
		errs := len(all.Errs())
		if errs > 0 || len(all) > 0 {
			fmt.Fprintf(a.env.Stderr, "\n%s, %s in %s\n", plural(errs, "error"), plural(len(all)-errs, "warning"), plural(len(files), "file"))
		}
	}
	if failed {
		return exitErrors
	}
	return exitOK
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// checkStatic decodes prog and reports what pipe plan would refuse on any
// device (planner.CheckStatic).
func checkStatic(prog *lang.Program) diag.Diagnostics {
	dec, ds := stdlib.Decode(prog)
	if ds.HasErrors() {
		return ds
	}
	return append(ds, planner.CheckStatic(dec)...)
}
