package main

import (
	"fmt"
	"strings"

	"pipe/cmd/pipe/internal/views"
	"pipe/lang"
	"pipe/lang/render"
)

func init() {
	register(&command{name: "devices", usage: "pipe devices [--json] [FILE]",
		summary: "list the devices a plan can target: this machine, built-in profiles, a file's device blocks", run: runDevices})
}

func runDevices(a *app, args []string) int {
	fs := a.newFlags("devices")
	asJSON := fs.Bool("json", false, "write the devices as JSON on standard output")
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(files) > 1 {
		fmt.Fprintf(a.env.Stderr, "pipe devices takes at most one file; got %d (%s)\n", len(files), strings.Join(files, ", "))
		fmt.Fprintln(a.env.Stderr, "usage: pipe devices [--json] [FILE]")
		return exitErrors
	}
	var prog *lang.Program
	if len(files) == 1 {
		p, _, src, display, ds, err := a.load(files[0])
		if err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe devices: %v\n", err)
			return exitErrors
		}
		if ds.HasErrors() {
			a.printDiags(ds, render.Sources{display: src})
			return exitErrors
		}
		prog = p
	}
	devs := a.workflow("").Devices(prog)
	if *asJSON {
		if err := views.DevicesJSON(a.env.Stdout, devs); err != nil {
			return exitErrors
		}
		return exitOK
	}
	views.Devices(a.env.Stdout, devs)
	return exitOK
}
