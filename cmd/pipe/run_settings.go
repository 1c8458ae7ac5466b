package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
)

// A run's folder records the run's --set overrides and the flags that
// shape what it trains (folder.Settings), so that a resume trains as the
// run did whatever its command line says: given none of them, it takes
// the run's (and says so); given other overrides, it is refused, naming
// both; a flag given wins, said, and the resume's own checks decide
// whether the checkpoint continues under it (another layout of the same
// step does: an elastic job's). Reasons: docs/design/run-identity.md.
var (
	// recordedFlags are the flags the record keeps.
	recordedFlags = []string{"plan", "device", "batch", "engine", "nproc-per-node", "nnodes", "threads"}
	// launcherFlags are a launcher's to say (its world size), not the
	// record's: an elastic job resumes on another number of ranks.
	launcherFlags = []string{"nproc-per-node", "nnodes"}
	// planFixed are what a plan file fixes: with --plan given they are
	// not taken from the record (the file's own decide), nor may they be
	// given (runFlags.check).
	planFixed = []string{"device", "batch", "engine", "nproc-per-node", "nnodes"}
)

// settings are what this run records in its folder: the overrides as
// parsed and the recorded flags the command line gave.
func (a *app) settings(fs *flag.FlagSet) folder.Settings {
	s := folder.Settings{Overrides: a.overrides()}
	for _, name := range recordedFlags {
		if isSet(fs, name) {
			if s.Flags == nil {
				s.Flags = map[string]string{}
			}
			s.Flags[name] = fs.Lookup(name).Value.String()
		}
	}
	return s
}

// recall makes a run that continues its folder's run in place (--resume
// without a path, a job's start, a launcher's restart) take the run's
// recorded settings: it returns the input to run, loaded again when the
// overrides or --plan came from the record, or nil and the exit code
// when the command line gives other values than the run's.
func (a *app) recall(fs *flag.FlagSet, f *runFlags, files []string, in *runInput, w run.Where, l *launched) (*runInput, int) {
	dec, _ := stdlib.Decode(in.prog)
	dir := run.ContinuedFolder(dec.Spec, "", w)
	restarted := l != nil && l.restarts > 0
	inPlace := f.resume.set && f.resume.path == ""
	if dir == "" || (!inPlace && w.Job.ID == "" && !restarted) {
		return in, exitOK
	}
	if _, err := os.Stat(filepath.Join(dir, folder.LastCheckpoint)); err != nil && !inPlace {
		return in, exitOK // a first start: nothing to continue
	}
	rec, err := folder.ReadSettings(dir)
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe run: reading the run's settings: %v\n", err)
		return nil, exitErrors
	}
	if rec == nil {
		return in, exitOK // a run of an older pipe: the checkpoint's overrides are checked
	}
	took, replaced, differ := a.adoptSettings(fs, f, rec, l != nil)
	recorded := filepath.Join(dir, folder.SettingsFile)
	if len(differ) > 0 {
		fmt.Fprintf(a.env.Stderr, "pipe run: refusing to continue the run in %s: it was started with other overrides (%s records them): %s. Leave --set out and the run's own are taken; to train otherwise, start a new run from its checkpoint with --resume=%s\n",
			dir, recorded, strings.Join(differ, "; "), filepath.Join(dir, folder.LastCheckpoint))
		return nil, exitErrors
	}
	if len(replaced) > 0 {
		fmt.Fprintf(a.env.Stderr, "pipe run: this command's flags replace the run's (%s): %s\n", recorded, strings.Join(replaced, "; "))
	}
	if len(took) == 0 {
		return in, exitOK
	}
	fmt.Fprintf(a.env.Stderr, "pipe run: continuing with the run's own settings (%s): %s\n", recorded, strings.Join(took, " "))
	if msg := f.check(fs, files); msg != "" {
		fmt.Fprintln(a.env.Stderr, msg)
		return nil, exitErrors
	}
	return a.loadRun(f, files)
}

// adoptSettings sets the recorded settings the command line left out;
// it returns those it took, as flags, the flags given that replace the
// run's, and how the overrides given differ from the run's. Under a
// launcher the world's flags are left to it.
func (a *app) adoptSettings(fs *flag.FlagSet, f *runFlags, rec *folder.Settings, launcher bool) (took, replaced, differ []string) {
	now := a.settings(fs)
	switch {
	case slices.Equal(now.Overrides, rec.Overrides):
	case len(now.Overrides) == 0 && !isSet(fs, "plan"):
		f.over.sets = slices.Clone(rec.Overrides)
		took = append(took, run.SetFlags(rec.Overrides))
	default:
		differ = append(differ, fmt.Sprintf("it had %s, this command %s", run.SetFlags(rec.Overrides), run.SetFlags(now.Overrides)))
	}
	for _, name := range recordedFlags {
		if launcher && slices.Contains(launcherFlags, name) || isSet(fs, "plan") && slices.Contains(planFixed, name) {
			continue
		}
		was, had := rec.Flags[name]
		is, given := now.Flags[name]
		switch {
		case !given && had:
			if err := fs.Set(name, was); err != nil {
				differ = append(differ, fmt.Sprintf("its --%s %s cannot be given again (%v)", name, was, err))
				continue
			}
			took = append(took, "--"+name+" "+run.ShellQuote(was))
		case !given, is == was:
		case had:
			replaced = append(replaced, fmt.Sprintf("--%s %s for its %s", name, is, was))
		default:
			replaced = append(replaced, fmt.Sprintf("--%s %s, where it had none", name, is))
		}
	}
	return took, replaced, differ
}

// again is what the command to continue an interrupted run gives
// besides --resume, --checkpoint-dir and --plan: flags, --max-steps
// (which the record leaves to each command) and, on the nodes of a run
// that pipe started on several machines itself, each node's flags; own,
// the run's settings as flags, which a resume takes from the run's
// folder but a node other than rank 0's may not see, and a run again
// from the start needs. Under a launcher the job's own command goes on.
func (f *runFlags) again(fs *flag.FlagSet, l *launched) (flags, own []string, everyNode bool) {
	if *f.maxSteps > 0 {
		flags = append(flags, fmt.Sprintf("--max-steps %d", *f.maxSteps))
	}
	for _, name := range recordedFlags {
		if v, ok := f.settings.Flags[name]; ok && name != "plan" {
			own = append(own, "--"+name+" "+run.ShellQuote(v))
		}
	}
	if len(f.settings.Overrides) > 0 {
		own = append(own, run.SetFlags(f.settings.Overrides))
	}
	if l != nil || *f.engine.nnodes <= 1 {
		return flags, own, false
	}
	flags = append(flags, "--node-rank RANK", "--master-addr "+run.ShellQuote(*f.masterAddr))
	if isSet(fs, "master-port") {
		flags = append(flags, fmt.Sprintf("--master-port %d", *f.masterPort))
	}
	return flags, own, true
}
