package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pipe/cmd/pipe/internal/views"
)

// An explicit --batch 0 or --max-steps 0 is refused, not read as "not
// given"; so is a precision pipe has no inference for.
func TestZeroFlagsAreRefused(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, tinyPipe)
	for _, args := range [][]string{
		{"plan", "--batch", "0", file},
		{"plan", "--batch", "-2", file},
		{"run", "--batch", "0", file},
		{"run", "--max-steps", "0", file},
	} {
		code, _, stderr := runPipe(t, "", args...)
		if code != exitErrors || !strings.Contains(stderr, args[2]) || !strings.Contains(stderr, "at least 1") {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	code, _, stderr := runPipe(t, "", "run", "--precision", "int4", file)
	if code != exitErrors || !strings.Contains(stderr, "give int8 or fp32") {
		t.Errorf("--precision int4: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt")); err == nil {
		t.Error("a refused run wrote checkpoints")
	}
}

// A report that cannot be written fails the run before it trains.
func TestUnwritableReportFailsBeforeTraining(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, tinyPipe)
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runPipe(t, "", "run", "--checkpoint-dir", filepath.Join(dir, "ckpt"), "--report", filepath.Join(blocker, "run.json"), file)
	if code != exitErrors || !strings.Contains(stderr, "cannot write the report") || !strings.Contains(stderr, "nothing was trained") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt")); err == nil {
		t.Error("the run trained and checkpointed before failing on the report")
	}
}

func TestPercentIsNeverZeroForSomething(t *testing.T) {
	for _, c := range []struct {
		part, whole int64
		want        string
	}{{64, 19 << 10, "<1%"}, {0, 10, "0%"}, {1, 10, "10%"}, {10, 10, "100%"}, {5, 0, "500%"}} {
		if got := views.Percent(c.part, c.whole); got != c.want {
			t.Errorf("percent(%d, %d) = %s, want %s", c.part, c.whole, got, c.want)
		}
	}
}

func TestUnknownLogLevelIsRefused(t *testing.T) {
	code, _, stderr := runPipe(t, "", "--log-level", "bogus", "version")
	if code != exitErrors || !strings.Contains(stderr, "--log-level bogus") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	for _, l := range []string{"trace", "debug", "info", "warn", "error", "off", "WARN"} {
		if code, _, stderr := runPipe(t, "", "--log-level", l, "version"); code != exitOK {
			t.Errorf("--log-level %s: exit %d\n%s", l, code, stderr)
		}
	}
}

// TestSecondInterruptQuits: the first signal cancels the run, the second
// ends the process (exit 130) even where the default action would be
// to ignore it (a parent that ignores SIGINT).
func TestSecondInterruptQuits(t *testing.T) {
	sig := make(chan os.Signal, 2)
	done := make(chan struct{})
	defer close(done)
	cancelled := make(chan struct{})
	exited := make(chan int, 1)
	var out strings.Builder
	go watchInterrupts(sig, done, func() { close(cancelled) }, &out, func(code int) { exited <- code })
	sig <- os.Interrupt
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the first interrupt did not cancel the run")
	}
	sig <- os.Interrupt
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second interrupt did nothing")
	}
}
