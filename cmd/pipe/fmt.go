package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"pipe/diag"
	"pipe/lang/format"
	"pipe/lang/render"
	"pipe/run/folder"
	"pipe/stdlib"
)

func runFmt(a *app, args []string) int {
	fs := a.newFlags("fmt")
	write := fs.Bool("w", false, "write the result to the file instead of standard output")
	check := fs.Bool("check", false, "list files whose formatting differs and exit 2; change nothing")
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(files) == 0 {
		fmt.Fprintln(a.env.Stderr, "usage: pipe fmt [-w] [--check] FILE...")
		return exitErrors
	}
	code := exitOK
	for _, name := range files {
		src, display, err := a.readSource(name)
		if err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe fmt: %v\n", err)
			code = exitErrors
			continue
		}
		out, err := format.Source(src, format.WithLayers(stdlib.IsLayer))
		if err != nil {
			var ds diag.Diagnostics
			if errors.As(err, &ds) {
				for _, d := range ds {
					if d.Subject != nil {
						d.Subject.File = display
					}
				}
				a.printDiags(ds, render.Sources{display: src})
			} else {
				fmt.Fprintf(a.env.Stderr, "pipe fmt: %s: %v\n", display, err)
			}
			fmt.Fprintf(a.env.Stderr, "pipe fmt: %s not formatted: fix the errors above first\n", display)
			code = exitErrors
			continue
		}
		changed := !bytes.Equal(src, out)
		switch {
		case *check:
			if changed {
				fmt.Fprintln(a.env.Stdout, display)
				if code == exitOK {
					code = exitFmtCheck
				}
			}
		case *write && name != "-":
			if changed {
				if err := writeFileAtomic(name, out); err != nil {
					fmt.Fprintf(a.env.Stderr, "pipe fmt: %v\n", err)
					code = exitErrors
				}
			}
		default:
			_, _ = a.env.Stdout.Write(out)
		}
	}
	return code
}

// writeFileAtomic replaces name with data as a run's files are written
// (folder.WriteFileAtomic): an interrupted write never leaves a
// half-written file, and a file written over keeps its permissions.
func writeFileAtomic(name string, data []byte) error {
	err := folder.WriteFileAtomic(name, func(w io.Writer) error { _, err := w.Write(data); return err })
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
