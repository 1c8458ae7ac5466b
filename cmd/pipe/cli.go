package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/mattn/go-isatty"

	"pipe/diag"
	"pipe/lang"
	"pipe/lang/ast"
	"pipe/lang/render"
	"pipe/stdlib"
)

// Exit codes shared by every command.
const (
	exitOK       = 0
	exitErrors   = 1
	exitFmtCheck = 2
	exitNoFit    = 3
)

// Env is the process environment a command runs in; tests supply their own.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

type command struct {
	name, usage, summary string
	run                  func(*app, []string) int
}

var commands []*command

func register(c *command) { commands = append(commands, c) }

func init() {
	register(&command{name: "check", usage: "pipe check [--json] FILE...", summary: "parse and validate pipe files", run: runCheck})
	register(&command{name: "fmt", usage: "pipe fmt [-w] [--check] FILE...", summary: "format pipe files canonically", run: runFmt})
	register(&command{name: "version", usage: "pipe version", summary: "print the version", run: runVersion})
}

// app carries what every command needs: streams, logger, colour.
type app struct {
	env    *Env
	log    hclog.Logger
	color  bool
	schema lang.Schema
	// sets are the --set flags every load applies (override.go);
	// parsedSets the same, parsed.
	sets       []string
	parsedSets []lang.Set
	// sweepPath is the file pipe sweep was given, which each trial's
	// plan loads again.
	sweepPath string
}

// Main runs the pipe command line and returns the exit code.
func Main(args []string, env *Env) int {
	global := flag.NewFlagSet("pipe", flag.ContinueOnError)
	global.SetOutput(env.Stderr)
	level := global.String("log-level", "warn", "log level: trace, debug, info, warn, error, off")
	noColor := global.Bool("no-color", false, "disable colour (NO_COLOR is honoured too)")
	// Usage is printed here, not by the flag package: to standard output
	// when asked for (-h, --help), to standard error after a mistake.
	global.Usage = func() {}
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(env.Stdout)
			return exitOK
		}
		usage(env.Stderr)
		return exitErrors
	}
	lvl := hclog.LevelFromString(*level)
	if lvl == hclog.NoLevel {
		fmt.Fprintf(env.Stderr, "pipe: --log-level %s: give trace, debug, info, warn, error or off\n", *level)
		return exitErrors
	}
	rest := global.Args()
	if len(rest) == 0 {
		usage(env.Stderr)
		return exitErrors
	}
	color := !*noColor && env.Getenv("NO_COLOR") == "" && isTerminal(env.Stderr)
	a := &app{env: env, color: color, schema: stdlib.Schema()}
	a.log = hclog.New(&hclog.LoggerOptions{
		Name: "pipe", Level: lvl, Output: env.Stderr,
		Color: colorOption(color), DisableTime: true,
	})
	for _, c := range commands {
		if c.name == rest[0] {
			return c.run(a, rest[1:])
		}
	}
	if rest[0] == "help" || rest[0] == "-h" {
		usage(env.Stdout)
		return exitOK
	}
	fmt.Fprintf(env.Stderr, "pipe: unknown command %q", rest[0])
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	if near := lang.Nearest(rest[0], names); near != "" {
		fmt.Fprintf(env.Stderr, "; did you mean %s?", near)
	}
	fmt.Fprint(env.Stderr, "\n\n")
	usage(env.Stderr)
	return exitErrors
}

func colorOption(on bool) hclog.ColorOption {
	if on {
		return hclog.AutoColor
	}
	return hclog.ColorOff
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "pipe: declarative pipelines for training and running deep-learning models")
	fmt.Fprintln(w, "\nUsage:")
	cs := append([]*command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-40s %s\n", c.usage, c.summary)
	}
	fmt.Fprintln(w, "\nGlobal flags (before the command): --log-level LEVEL, --no-color")
	fmt.Fprintln(w, "A FILE of - reads standard input.")
}

// newFlags builds a command's flag set with the shared behaviour: its
// usage is the command's usage line, then its flags.
func (a *app) newFlags(c string) *flag.FlagSet {
	fs := flag.NewFlagSet("pipe "+c, flag.ContinueOnError)
	fs.SetOutput(a.env.Stderr)
	fs.Usage = func() {
		for _, cmd := range commands {
			if cmd.name == c {
				fmt.Fprintf(fs.Output(), "usage: %s\n\n%s\n", cmd.usage, cmd.summary)
			}
		}
		fmt.Fprintln(fs.Output(), "\nflags:")
		fs.PrintDefaults()
	}
	return fs
}

// globalFlags are pipe's own flags, given before the command.
var globalFlags = map[string]bool{"log-level": true, "no-color": true}

// globalFlagHint says where a global flag goes, with an example.
func globalFlagHint(name, cmd string) string {
	example := "--" + name
	if name == "log-level" {
		example += " debug"
	}
	return fmt.Sprintf("--%s is pipe's own flag: give it before the command, as in pipe %s %s ...", name, example, cmd)
}

// parseFlags parses flags wherever they appear among the file names. An
// unknown flag is reported with the nearest one, its own or a global one,
// and a global flag given after the command with where it goes. Asked
// for (-h, --help), the usage goes to standard output and the error is
// flag.ErrHelp, which flagExit turns into exit 0.
func (a *app) parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	cmd := strings.TrimPrefix(fs.Name(), "pipe ")
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(a.env.Stdout)
				fs.Usage()
				return nil, err
			}
			const undefined = "flag provided but not defined: -"
			msg := err.Error()
			if name, ok := strings.CutPrefix(msg, undefined); ok {
				name = strings.TrimLeft(name, "-")
				if globalFlags[name] {
					fmt.Fprintf(out, "%s: %s\n", fs.Name(), globalFlagHint(name, cmd))
					return nil, err
				}
				var names []string
				fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
				for g := range globalFlags {
					names = append(names, g)
				}
				msg = fmt.Sprintf("unknown flag --%s", name)
				if near := lang.Nearest(name, names); globalFlags[near] {
					msg += fmt.Sprintf("; did you mean --%s? %s", near, globalFlagHint(near, cmd))
				} else if near != "" {
					msg += fmt.Sprintf("; did you mean --%s?", near)
				}
			}
			fmt.Fprintf(out, "%s: %s (pipe %s -h lists its flags)\n", fs.Name(), msg, cmd)
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return files, nil
		}
		files = append(files, args[0])
		args = args[1:]
	}
}

// flagExit is a command's exit code when parseFlags failed: 0 when help
// was asked for, 1 for a mistake.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitErrors
}

// oneFile says why files is not the one file cmd takes, "" when it is.
func oneFile(cmd string, files []string) string {
	switch len(files) {
	case 1:
		return ""
	case 0:
		return fmt.Sprintf("pipe %s takes one file; got none", cmd)
	}
	return fmt.Sprintf("pipe %s takes one file; got %d (%s)", cmd, len(files), strings.Join(files, ", "))
}

// isSet reports whether the flag was given on the command line, so that
// an explicit --batch 0 is told apart from no --batch.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// readSource reads a file, or standard input for "-".
func (a *app) readSource(name string) ([]byte, string, error) {
	if name == "-" {
		b, err := io.ReadAll(io.LimitReader(a.env.Stdin, 64<<20))
		return b, "<stdin>", err
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, name, err
	}
	if st.IsDir() {
		return nil, name, fmt.Errorf("%s is a directory; give .pipe files", name)
	}
	if st.Size() > 64<<20 {
		return nil, name, fmt.Errorf("%s is %d bytes: too large for a pipe file", name, st.Size())
	}
	b, err := os.ReadFile(name)
	return b, name, err
}

// load parses and checks one file.
func (a *app) load(name string) (*lang.Program, *ast.File, []byte, string, diag.Diagnostics, error) {
	src, display, err := a.readSource(name)
	if err != nil {
		return nil, nil, nil, display, nil, err
	}
	if len(a.sets) > 0 {
		sets, sds := lang.ParseSets(a.sets)
		a.parsedSets = sets
		if sds.HasErrors() {
			return nil, nil, src, display, sds, nil
		}
		var ods diag.Diagnostics
		if src, ods = lang.Override(display, src, sets, a.schema); ods.HasErrors() {
			return nil, nil, src, display, ods, nil
		}
	}
	f, ds := lang.Parse(display, src)
	p, cds := lang.Check(f, a.schema)
	ds = append(ds, cds...)
	if p != nil && !ds.HasErrors() {
		// A sweep's parameters name values of the file: each is resolved
		// as --set would be, its values checked there.
		_, sds := lang.SweepParams(p, src, a.schema)
		ds = append(ds, sds...)
	}
	ds.Sort()
	return p, f, src, display, ds, nil
}

// overrides are the --set flags as the plan records them.
func (a *app) overrides() []string {
	var out []string
	for _, s := range a.parsedSets {
		out = append(out, s.String())
	}
	return out
}

func (a *app) printDiags(ds diag.Diagnostics, sources render.Sources) {
	if len(ds) == 0 {
		return
	}
	if len(a.parsedSets) > 0 {
		withFlags := render.Sources{lang.CommandLine: []byte(lang.OverrideText(a.parsedSets))}
		for k, v := range sources {
			withFlags[k] = v
		}
		sources = withFlags
	}
	_ = render.Text(a.env.Stderr, ds, sources, render.Options{Color: a.color})
}
