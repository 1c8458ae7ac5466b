package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const profilePipe = `pipeline prof
seed 4
source blobs synthetic { samples 96  shape [1, 8, 8]  classes 3  seed 9 }
source test synthetic { samples 32  shape [1, 8, 8]  classes 3  seed 10 }
model net {
  input [1, 8, 8]
  conv 4 k3 pad1 -> batchnorm -> relu -> maxpool 2
  flatten -> dense 3
}
train { source blobs  epochs 1  batch 16  optimizer adam lr 0.01  loss cross_entropy  metrics [accuracy] }
evaluate { source test }
`

// TestRunProfile profiles a small CNN on the native engine: the table
// names every kernel, the most expensive first, the trace is a Trace
// Event Format object, and the report holds the profile.
func TestRunProfile(t *testing.T) {
	fixedHost(t)
	dir, file := tiny(t, profilePipe)
	trace := filepath.Join(dir, "trace.json")
	code, stdout, stderr := runPipe(t, "", runArgs(dir, "--profile", "--profile-warmup", "1", "--profile-out", trace, "--max-steps", "4", "--threads", "1", file)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	i := strings.Index(stdout, "profile (native engine, training): 3 steps after 1 warm-up")
	if i < 0 {
		t.Fatalf("no profile table:\n%s", stdout)
	}
	table := stdout[i:]
	for _, want := range []string{"conv1+batchnorm1+relu1", "maxpool1", "dense1", "whole step", "meas/est", "evaluation: ", "trace: " + trace} {
		if !strings.Contains(table, want) {
			t.Errorf("the table has no %q:\n%s", want, table)
		}
	}
	// Rows come most expensive first: their shares do not grow.
	prev := 101.0
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] < "1" || f[0] > "9" {
			continue
		}
		var share float64
		for _, c := range f {
			if strings.HasSuffix(c, "%") {
				share = parseFloat(t, strings.TrimSuffix(c, "%"))
				break
			}
		}
		if share > prev {
			t.Errorf("row %q has a larger share than the row above (%v%%)", line, prev)
		}
		prev = share
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &tr); err != nil || len(tr.TraceEvents) < 10 {
		t.Fatalf("trace: %v, %d events", err, len(tr.TraceEvents))
	}
	rep := readReport(t, dir)
	prof, _ := rep["profile"].(map[string]any)
	train, _ := prof["train"].(map[string]any)
	layers, _ := train["layers"].([]any)
	if len(layers) != 5 || train["steps"] != 3.0 {
		t.Errorf("the report's profile: %v", prof)
	}

	// Evaluation only, from the checkpoint: the forward passes.
	code, stdout, stderr = runPipe(t, "", runArgs(dir, "--resume", "--skip-train", "--profile", "--profile-warmup", "0", "--profile-out", trace, "--threads", "1", file)...)
	if code != exitOK {
		t.Fatalf("--skip-train: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "profile (native engine, evaluation): 2 batches after 0 warm-up") || !strings.Contains(stdout, "whole batch") {
		t.Errorf("--skip-train --profile:\n%s", stdout)
	}
}

func TestRunProfileRefused(t *testing.T) {
	fixedHost(t)
	dir, file := tiny(t, profilePipe)
	code, _, stderr := runPipe(t, "", runArgs(dir, "--profile-out", filepath.Join(dir, "t.json"), file)...)
	if code != exitErrors || !strings.Contains(stderr, "need --profile") {
		t.Errorf("--profile-out alone: exit %d, %s", code, stderr)
	}
	fakeBackend(t)
	code, _, stderr = runPipe(t, "", runArgs(dir, "--profile", "--profile-out", filepath.Join(dir, "t.json"), file)...)
	if code != exitErrors || !strings.Contains(stderr, "profile: not supported by this engine") {
		t.Errorf("an engine that cannot profile: exit %d, %s", code, stderr)
	}
}

func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}
