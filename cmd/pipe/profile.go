package main

import (
	"flag"
	"fmt"

	"pipe/run"
	"pipe/run/report"
	"pipe/workflow"
)

// profileFlag are pipe run's --profile flags.
type profileFlag struct {
	on     *bool
	out    *string
	warmup *int
}

func profileFlags(fs *flag.FlagSet) *profileFlag {
	return &profileFlag{
		on:     fs.Bool("profile", false, "time every layer's forward and backward pass by the clock and print them beside the plan's roofline estimate; write a Chrome trace (--profile-out) and add the profile to the report"),
		out:    fs.String("profile-out", "", "with --profile: the Chrome trace (Perfetto, chrome://tracing) goes here (default trace.json in the run's folder)"),
		warmup: fs.Int("profile-warmup", 5, "with --profile: the first training steps and evaluation batches run but not counted"),
	}
}

// check says what is wrong with the flags, "" when nothing.
func (f *profileFlag) check(fs *flag.FlagSet) string {
	switch {
	case !*f.on && (isSet(fs, "profile-out") || isSet(fs, "profile-warmup")):
		return "--profile-out and --profile-warmup need --profile"
	case *f.warmup < 0:
		return "--profile-warmup must not be negative"
	}
	return ""
}

// write prints the profile's table and writes its trace to path; false
// when the trace could not be written.
func (f *profileFlag) write(a *app, res *run.Result, path string) bool {
	if !*f.on || res.Profile == nil {
		return true
	}
	pr := res.Profile
	if pr.Train == nil && pr.Eval == nil {
		fmt.Fprintf(a.env.Stderr, "pipe run: --profile: nothing was timed after the %d warm-up steps; lower --profile-warmup or run more steps\n", pr.Warmup)
		return true
	}
	report.ProfileTable(a.env.Stdout, pr)
	if err := workflow.WriteTrace(pr, path); err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe run: writing the profile's trace: %v\n", err)
		return false
	}
	fmt.Fprintf(a.env.Stdout, "trace: %s (open it in Perfetto or chrome://tracing)\n", path)
	return true
}
