package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// planJSON is pipe plan --json's plan as a map, less what names the file
// and the overrides it came from.
func planJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, stdout, stderr := runPipe(t, "", append([]string{"plan", "--json", "--device", "cpu"}, args...)...)
	if code != exitOK {
		t.Fatalf("pipe plan %v: exit %d\n%s", args, code, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"file", "source_sha256", "overrides"} {
		delete(m, k)
	}
	return m
}

// TestSetChangesThePlan: --set reaches a train field, an optimizer
// argument and a layer's argument, and the plan records the flags.
func TestSetChangesThePlan(t *testing.T) {
	fixedHost(t)
	t.Chdir("../..")
	code, stdout, stderr := runPipe(t, "", "plan", "--json", "--device", "cpu", "--set", "train.batch=32",
		"--set", "train.lr=3e-4", "--set", "model.mlp.dense[0].units=64", "examples/fashion_mlp.pipe")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var p struct {
		BatchSize  int64    `json:"batch_size"`
		Parameters int64    `json:"parameters"`
		Overrides  []string `json:"overrides"`
		Optimizer  struct {
			LR float64 `json:"lr"`
		} `json:"optimizer"`
	}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatal(err)
	}
	// 784·64+64 + 64·128+128 + 128·10+10 parameters.
	if p.BatchSize != 32 || p.Optimizer.LR != 3e-4 || p.Parameters != 784*64+64+64*128+128+128*10+10 {
		t.Errorf("batch %d, lr %g, %d parameters", p.BatchSize, p.Optimizer.LR, p.Parameters)
	}
	if strings.Join(p.Overrides, " ") != "train.batch=32 train.lr=3e-4 model.mlp.dense[0].units=64" {
		t.Errorf("overrides %q", p.Overrides)
	}
	_, table, _ := runPipe(t, "", "plan", "--device", "cpu", "--set", "train.batch=32", "examples/fashion_mlp.pipe")
	if !strings.Contains(table, "with --set train.batch=32") {
		t.Errorf("the plan's table does not say its overrides:\n%s", table)
	}
}

// TestPrintConfigPlansTheSame: the file --print-config writes plans as
// the file with the overrides does.
func TestPrintConfigPlansTheSame(t *testing.T) {
	fixedHost(t)
	t.Chdir("../..")
	sets := []string{"--set", "train.batch=32", "--set", "train.optimizer=sgd", "--set", "train.momentum=0.9",
		"--set", "model.fashion.conv[1].kernel=5", "--set", "model.fashion.dropout.p=0.5", "--set", "seed=7"}
	code, cfg, stderr := runPipe(t, "", append(append([]string{"check", "--print-config"}, sets...), "examples/fashion.pipe")...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"conv 64 k5 pad1", "dropout 0.5", "optimizer sgd lr 1e-3 momentum 0.9", "batch 32", "\nseed"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, cfg)
		}
	}
	file := filepath.Join(t.TempDir(), "fashion.pipe")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// The written file's relative data paths are the example's: plan it
	// from the same folder.
	got := planJSON(t, file)
	want := planJSON(t, append(sets, "examples/fashion.pipe")...)
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("--print-config's file plans otherwise:\n%s\nagainst\n%s", g, w)
	}
}

// TestSetMistakesPointAtTheFlag: a wrong path or value is an error on
// the command line, with a did-you-mean and a caret under the flag.
func TestSetMistakesPointAtTheFlag(t *testing.T) {
	t.Chdir("../..")
	for _, c := range []struct {
		set  string
		want []string
	}{
		{"train.lrr=1", []string{"command line:1:", "did you mean lr?", "--set train.lrr=1", "^^^"}},
		{"train.lr=abc", []string{"command line:1:", "--set train.lr=abc"}},
		{"model.mlp.dense[3].units=5", []string{"3 dense layers"}},
	} {
		code, _, stderr := runPipe(t, "", "check", "--set", c.set, "examples/fashion_mlp.pipe")
		if code != exitErrors {
			t.Errorf("--set %s: exit %d", c.set, code)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("--set %s: want %q in\n%s", c.set, w, stderr)
			}
		}
	}
}

// TestRunRecordsItsOverrides: the report says what the run was given, a
// plan made with --set runs with them, and --set cannot change a plan.
func TestRunRecordsItsOverrides(t *testing.T) {
	t.Chdir("../..")
	dir := t.TempDir()
	planFile := filepath.Join(dir, "plan.json")
	if code, _, stderr := runPipe(t, "", "plan", "--device", "cpu", "--set", "train.lr=0.01", "--set", "train.batch=16",
		"--out", planFile, "examples/fashion_mlp.pipe"); code != exitOK {
		t.Fatalf("plan: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runPipe(t, "", "run", "--plan", planFile, "--set", "train.lr=1", "examples/fashion_mlp.pipe"); code != exitErrors ||
		!strings.Contains(stderr, "--set plans again") {
		t.Errorf("--set with --plan: exit %d\n%s", code, stderr)
	}
	ck := filepath.Join(dir, "run")
	code, _, stderr := runPipe(t, "", "run", "--plan", planFile, "--max-steps", "2", "--threads", "1", "--checkpoint-dir", ck, "examples/fashion_mlp.pipe")
	if code != exitOK {
		t.Fatalf("run --plan: exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(ck, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Overrides []string `json:"overrides"`
		Plan      struct {
			BatchSize int64   `json:"batch_size"`
			LR        float64 `json:"lr"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.Overrides, " ") != "train.lr=0.01 train.batch=16" || r.Plan.BatchSize != 16 || r.Plan.LR != 0.01 {
		t.Errorf("report: overrides %q, batch %d, lr %g", r.Overrides, r.Plan.BatchSize, r.Plan.LR)
	}
}
