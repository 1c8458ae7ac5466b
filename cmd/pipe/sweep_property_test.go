package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pipe/sweep"
)

// TestSweepPropertyCLI runs random small sweep blocks of tinySweepPipe
// through pipe sweep, with trials as processes of their own on the
// native engine: each run is interrupted at a random event (as Ctrl-C
// would) and run again until the sweep is done. After every run the
// sweep.json loads and validates, no trial is left running, the exit
// code is 130 for an interrupted run and 0, 1 or 3 for one that ran to
// its end, as its trials say,
// and best.pipe and sweep.png are there exactly when a trial completed
// or has a metric. The seed (logged; PIPE_SWEEP_PROPERTY_SEED replays
// it) fixes the blocks and the events cut at.
func TestSweepPropertyCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("trains sweeps")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PIPE_SWEEP_PROPERTY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with PIPE_SWEEP_PROPERTY_SEED=%d)", seed, seed)
	for c := range 8 {
		rng := rand.New(rand.NewPCG(seed, uint64(c)))
		block, sets := randomSweepBlock(rng)
		t.Logf("case %d: %s %s", c, strings.TrimSpace(block), strings.Join(sets, " "))
		propertyCLICase(t, rng, block, sets)
	}
}

// randomSweepBlock is a sweep block of 1 to 3 trials over 1 to 3 of
// the tiny pipeline's values, and the --set of its epochs.
func randomSweepBlock(rng *rand.Rand) (string, []string) {
	pool := []string{`loguniform "train.lr" 1e-4 1`, `int "model.net.dense[0].units" 2 64 log`,
		`choice "train.optimizer" [adam, sgd]`, `uniform "train.grad_clip" 0.5 5`}
	var lines []string
	for _, k := range rng.Perm(len(pool))[:1+rng.IntN(3)] {
		lines = append(lines, pool[k])
	}
	metric := []string{"loss", "accuracy", "accuracy min"}[rng.IntN(3)]
	sampler := []string{"random", "tpe startup 1"}[rng.IntN(2)]
	stop := []string{"none", "asha rung 1 eta 2", "median rung 1"}[rng.IntN(3)]
	block := fmt.Sprintf("sweep {\n  trials %d  parallel %d  metric %s  sampler %s  early_stop %s  seed %d\n  %s\n}\n",
		1+rng.IntN(3), 1+rng.IntN(2), metric, sampler, stop, rng.IntN(100), strings.Join(lines, "\n  "))
	return block, []string{"--set", fmt.Sprintf("train.epochs=%d", 1+rng.IntN(3))}
}

func propertyCLICase(t *testing.T, rng *rand.Rand, block string, sets []string) {
	dir, file := tinySweep(t, block)
	out := filepath.Join(dir, "sweep")
	args := append(append([]string{"sweep", "--dir", out, "--threads", "1"}, sets...), file)
	oldCtx, oldSave := sweepContext, sweepSave
	t.Cleanup(func() { sweepContext, sweepSave = oldCtx, oldSave })
	for round := 0; ; round++ {
		if round > 8 {
			t.Fatalf("not done after %d runs", round)
		}
		ctx, cancel := context.WithCancel(context.Background())
		sweepContext = func(*app) (context.Context, func()) { return ctx, cancel }
		at, saves := 2+rng.IntN(10), 0
		if round >= 3 {
			at = -1 // the last runs go to the end
		}
		sweepSave = func(path string, s *sweep.State) error {
			if saves++; saves == at {
				cancel()
			}
			return oldSave(path, s)
		}
		code, stdout, stderr := runPipe(t, "", args...)
		cancel()
		st, err := sweep.Load(filepath.Join(out, "sweep.json"))
		if err != nil {
			t.Fatalf("run %d: exit %d, %v\n%s", round, code, err, stderr)
		}
		checkSweepOutputs(t, out, st, code, stdout+stderr, saves >= at && at > 0)
		if st.Done {
			return
		}
	}
}

// checkSweepOutputs checks a run's exit code and files against its
// state and whether it was interrupted (130 then, even when the trials
// running ended before they saw it).
func checkSweepOutputs(t *testing.T, out string, st *sweep.State, code int, output string, interrupted bool) {
	t.Helper()
	completed, measured, fit := false, false, false
	for _, tr := range st.Runs {
		v, ok := tr.Last()
		completed = completed || tr.Status == sweep.Done
		measured = measured || (ok && v == v && (tr.Status == sweep.Done || tr.Status == sweep.Stopped))
		fit = fit || tr.Status != sweep.Skipped
		if tr.Status == sweep.Running {
			t.Errorf("trial %d left running", tr.ID)
		}
	}
	want := exitOK
	switch {
	case interrupted:
		want = exitInterrupted
	case !st.Done:
		t.Errorf("not done, not interrupted")
	case !completed && !fit:
		want = exitNoFit
	case !completed:
		want = exitErrors
	}
	if code != want {
		t.Errorf("exit %d, want %d\n%s", code, want, output)
	}
	for name, there := range map[string]bool{"best.pipe": completed, "sweep.png": measured} {
		if _, err := os.Stat(filepath.Join(out, name)); (err == nil) != there || !strings.Contains(output, name) {
			t.Errorf("%s: there %v, stat %v\n%s", name, there, err, output)
		}
	}
}
