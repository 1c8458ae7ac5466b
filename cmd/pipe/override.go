package main

import (
	"flag"
	"fmt"
	"strings"

	"pipe/lang/format"
	"pipe/stdlib"
)

// setList is the repeatable --set flag.
type setList []string

func (s *setList) String() string     { return strings.Join(*s, " ") }
func (s *setList) Set(v string) error { *s = append(*s, v); return nil }

// overrideFlags are --set and --print-config, which run, plan and check
// take: the file is read with the overrides applied, as if it said so.
type overrideFlags struct {
	sets        setList
	printConfig *bool
}

func newOverrideFlags(fs *flag.FlagSet) *overrideFlags {
	o := &overrideFlags{}
	fs.Var(&o.sets, "set", "override a value of the file: PATH=VALUE, such as train.lr=3e-4 or model.NAME.dense[0].units=256 (repeatable)")
	o.printConfig = fs.Bool("print-config", false, "print the file with the overrides applied, formatted, and stop")
	return o
}

// use makes a's loads apply the overrides.
func (o *overrideFlags) use(a *app) { a.sets = o.sets }

// printConfig writes src (the file after its overrides) formatted.
func (a *app) printConfig(src []byte, display string) int {
	out, err := format.Source(src, format.WithLayers(stdlib.IsLayer))
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe: %s: %v\n", display, err)
		return exitErrors
	}
	_, _ = a.env.Stdout.Write(out)
	return exitOK
}
