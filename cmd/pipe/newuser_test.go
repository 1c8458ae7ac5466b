package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What a new user hit, at the command line.

const rowsPipe = `pipeline rows
source rows synthetic { samples 1600  shape [8]  classes 3 }
model m {
  input [8]
  dense 16 -> relu -> dense 3
}
train { epochs 2  batch %s  optimizer adam lr 1e-3  loss cross_entropy }
`

func rowsFile(t *testing.T, batch string) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = filepath.Join(dir, "rows.pipe")
	if err := os.WriteFile(file, []byte(strings.Replace(rowsPipe, "%s", batch, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// TestCheckReportsWhatPlanWouldRefuse: pipe check reports a batch and an
// effective_batch that cannot go together, as pipe plan does.
func TestCheckReportsWhatPlanWouldRefuse(t *testing.T) {
	_, file := rowsFile(t, "32  effective_batch 16")
	code, _, stderr := runPipe(t, "", "check", file)
	if code != exitErrors || !strings.Contains(stderr, "batch-exceeds-effective") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	_, file = rowsFile(t, "32  effective_batch 96")
	if code, _, stderr := runPipe(t, "", "check", file); code != exitOK {
		t.Errorf("a batch that divides effective_batch: exit %d\n%s", code, stderr)
	}
}

// TestRunRefusesABatchTheDataCannotForm: --batch 5000 on 1,600 rows is
// refused before any training, and batch auto trains with enough steps an
// epoch.
func TestRunRefusesABatchTheDataCannotForm(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := rowsFile(t, "auto")
	code, _, stderr := runPipe(t, "", runArgs(dir, "--batch", "5000", file)...)
	if code != exitErrors || !strings.Contains(stderr, "larger than the training set (1600 samples)") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "run.json")); err == nil {
		t.Error("a report was written")
	}
	code, _, stderr = runPipe(t, "", runArgs(dir, "--max-steps", "1", file)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	plan := readReport(t, dir)["plan"].(map[string]any)
	// At least 32 steps an epoch (the data bound it at 50; on the CPU the
	// speed estimate may stop lower, at 32 or more).
	if b := plan["batch_size"].(float64); b < 32 || b > 1600/32 {
		t.Errorf("batch auto on 1600 rows: %v", b)
	}
}

// TestEditedPlanIsRefused: a plan file edited by hand is refused with a
// message, never an internal error: a batch out of any range when it is
// read, one that does not fit when it is planned again.
func TestEditedPlanIsRefused(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := rowsFile(t, "32")
	planFile := filepath.Join(dir, "plan.json")
	if code, _, stderr := runPipe(t, "", "plan", "--out", planFile, file); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	orig, _ := os.ReadFile(planFile)
	edit := func(from, to string) {
		t.Helper()
		s := strings.Replace(string(orig), from, to, 1)
		if s == string(orig) {
			t.Fatalf("%q is not in the plan", from)
		}
		os.WriteFile(planFile, []byte(s), 0o644)
	}
	edit(`"batch_size": 32,`, `"batch_size": 1000000000,`)
	code, _, stderr := runPipe(t, "", runArgs(dir, "--plan", planFile, file)...)
	if code != exitErrors || !strings.Contains(stderr, "batch_size 1000000000 is outside") || strings.Contains(stderr, "internal") {
		t.Errorf("batch 1e9: exit %d\n%s", code, stderr)
	}
	edit(`"batch_size": 32,`, `"batch_size": 1500,`)
	code, _, stderr = runPipe(t, "", runArgs(dir, "--plan", planFile, file)...)
	if code != exitErrors || !strings.Contains(stderr, "effective_batch") {
		t.Errorf("batch 1500 with effective_batch 32 left: exit %d\n%s", code, stderr)
	}
	s := strings.Replace(strings.Replace(string(orig), `"batch_size": 32,`, `"batch_size": 5000,`, 1), `"effective_batch": 32,`, `"effective_batch": 5000,`, 1)
	os.WriteFile(planFile, []byte(s), 0o644)
	code, _, stderr = runPipe(t, "", runArgs(dir, "--plan", planFile, file)...)
	if code != exitErrors || !strings.Contains(stderr, "larger than the training set") {
		t.Errorf("batch 5000 on 1600 rows: exit %d\n%s", code, stderr)
	}
	os.WriteFile(planFile, orig, 0o644)
	if code, _, stderr := runPipe(t, "", runArgs(dir, "--plan", planFile, "--max-steps", "1", file)...); code != exitOK {
		t.Errorf("the plan as written: exit %d\n%s", code, stderr)
	}
}

// TestMessagesPointAtTheFix: unknown commands and flags get the nearest
// name, a global flag after the command says where it goes, and plan
// --json of a broken file writes its diagnostics as JSON.
func TestMessagesPointAtTheFix(t *testing.T) {
	_, file := rowsFile(t, "32")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plna", file}, "did you mean plan?"},
		{[]string{"run", "--max-step", "3", file}, "did you mean --max-steps?"},
		{[]string{"plan", "--devise", "cpu", file}, "did you mean --device?"},
		{[]string{"run", "--log-level", "debug", file}, "give it before the command, as in pipe --log-level debug run"},
	} {
		code, _, stderr := runPipe(t, "", c.args...)
		if code != exitErrors || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d\n%s", c.args, code, stderr)
		}
	}
	_, broken := rowsFile(t, "32  effective_batch 16")
	code, stdout, _ := runPipe(t, "", "plan", "--json", broken)
	var ds []map[string]any
	if err := json.Unmarshal([]byte(stdout), &ds); err != nil || code != exitErrors || len(ds) == 0 || ds[0]["code"] != "batch-exceeds-effective" {
		t.Errorf("exit %d, %v:\n%s", code, err, stdout)
	}
}
