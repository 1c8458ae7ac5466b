package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// runPipe runs the CLI in-process with the given stdin.
func runPipe(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = Main(args, env)
	return code, out.String(), errb.String()
}

func examplePaths(t *testing.T) []string {
	paths, _ := filepath.Glob("../../examples/*.pipe")
	if len(paths) < 6 {
		t.Fatalf("found %d examples", len(paths))
	}
	return paths
}

func TestCheckExamples(t *testing.T) {
	code, _, stderr := runPipe(t, "", append([]string{"check"}, examplePaths(t)...)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}

func TestFmtCheckExamples(t *testing.T) {
	code, stdout, stderr := runPipe(t, "", append([]string{"fmt", "--check"}, examplePaths(t)...)...)
	if code != exitOK {
		t.Fatalf("exit %d: files to reformat: %s\n%s", code, stdout, stderr)
	}
}

const threeMistakes = `pipeline three
precision bf61
source train idx { images "a.gz"  labels "b.gz" }
model m {
  input [1, 28, 28]
  conv 32 k3 -> rleu -> flatten -> dense 10
}
train { epochs -2  optimizer adam lr 1e-3  loss cross_entropy }
`

func TestCheckReportsEveryMistake(t *testing.T) {
	code, _, stderr := runPipe(t, threeMistakes, "check", "-")
	if code != exitErrors {
		t.Fatalf("exit %d, want %d", code, exitErrors)
	}
	for _, want := range []string{
		"<stdin>:2:11: error: unknown precision 'bf61'",
		"<stdin>:6:17: error: unknown layer 'rleu'",
		"<stdin>:8:16: error: epochs in train is out of range",
		" 6 |   conv 32 k3 -> rleu -> flatten -> dense 10\n   |                 ^^^^",
		"Did you mean 'relu'?",
		"3 errors, 0 warnings in 1 file",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "\x1b[") {
		t.Error("colour on a non-terminal")
	}
}

func TestCheckJSON(t *testing.T) {
	code, stdout, _ := runPipe(t, threeMistakes, "check", "--json", "-")
	if code != exitErrors {
		t.Fatalf("exit %d", code)
	}
	var ds []struct {
		Severity, Code, Summary string
		Subject                 struct{ Start struct{ Line, Column int } }
	}
	if err := json.Unmarshal([]byte(stdout), &ds); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if len(ds) != 3 || ds[1].Code != "unknown-layer" || ds[1].Subject.Start.Line != 6 || ds[1].Severity != "error" {
		t.Fatalf("unexpected JSON: %+v", ds)
	}
}

func TestCheckMissingFile(t *testing.T) {
	code, _, stderr := runPipe(t, "", "check", "does/not/exist.pipe")
	if code != exitErrors || !strings.Contains(stderr, "exist.pipe") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

const messy = "pipeline   messy // name\ntrain{\nepochs 3   // three\n   batch 8\n}\n"

func TestFmtStdinAndCheck(t *testing.T) {
	code, stdout, _ := runPipe(t, messy, "fmt", "-")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stdout, "// name") || !strings.Contains(stdout, "// three") {
		t.Fatalf("comments lost:\n%s", stdout)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "m.pipe")
	if err := os.WriteFile(p, []byte(messy), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runPipe(t, "", "fmt", "--check", p); code != exitFmtCheck {
		t.Fatalf("fmt --check on a messy file: exit %d, want %d", code, exitFmtCheck)
	}
	if code, _, _ := runPipe(t, "", "fmt", "-w", p); code != exitOK {
		t.Fatalf("fmt -w: exit %d", code)
	}
	got, _ := os.ReadFile(p)
	if string(got) != stdout {
		t.Fatalf("fmt -w wrote\n%s\nwant\n%s", got, stdout)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("fmt -w changed the mode to %v", st.Mode().Perm())
	}
	if code, _, _ := runPipe(t, "", "fmt", "--check", p); code != exitOK {
		t.Fatalf("formatted file still differs")
	}
}

func TestFmtRefusesBrokenFile(t *testing.T) {
	code, stdout, stderr := runPipe(t, "train { epochs 3\n", "fmt", "-")
	if code != exitErrors || stdout != "" || !strings.Contains(stderr, "unclosed") {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
}

func TestUnknownCommandAndVersion(t *testing.T) {
	if code, _, stderr := runPipe(t, "", "chek"); code != exitErrors || !strings.Contains(stderr, "unknown command") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, stdout, _ := runPipe(t, "", "version"); code != exitOK || !strings.HasPrefix(stdout, "pipe ") {
		t.Fatalf("version: %d %q", code, stdout)
	}
}

// Help asked for goes to standard output with exit 0; usage printed after
// a mistake goes to standard error with exit 1.
func TestHelpGoesToStdout(t *testing.T) {
	asks := [][]string{{"--help"}, {"-h"}, {"help"}}
	for _, c := range commands {
		asks = append(asks, []string{c.name, "--help"}, []string{c.name, "-h"})
	}
	for _, args := range asks {
		code, stdout, stderr := runPipe(t, "", args...)
		if code != exitOK || !strings.Contains(strings.ToLower(stdout), "usage") || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"--bogus"}, {}, {"run", "--bogus", "x.pipe"}} {
		code, stdout, stderr := runPipe(t, "", args...)
		if code != exitErrors || stdout != "" || stderr == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// An unknown flag close to a global one is answered with the global one
// and where it goes, not with the command's nearest flag.
func TestUnknownFlagSuggestsGlobalFlag(t *testing.T) {
	code, _, stderr := runPipe(t, "", "run", "--log-lvel", "debug", "x.pipe")
	if code != exitErrors || !strings.Contains(stderr, "did you mean --log-level?") ||
		!strings.Contains(stderr, "before the command, as in pipe --log-level debug run") || strings.Contains(stderr, "log-every") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	code, _, stderr = runPipe(t, "", "plan", "--no-color", "x.pipe")
	if code != exitErrors || !strings.Contains(stderr, "as in pipe --no-color plan ...") {
		t.Errorf("--no-color after plan: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runPipe(t, "", "run", "--max-step", "3", "x.pipe")
	if code != exitErrors || !strings.Contains(stderr, "did you mean --max-steps?") {
		t.Errorf("--max-step: exit %d\n%s", code, stderr)
	}
}

// A command that takes one file says how many it got when it got another
// number, before the usage line.
func TestOneFileSaysWhy(t *testing.T) {
	for _, args := range [][]string{
		{"plan", "a.pipe", "b.pipe"},
		{"run", "a.pipe", "b.pipe"},
		{"serve", "a.pipe", "b.pipe"},
		{"export", "--onnx", "x.onnx", "a.pipe", "b.pipe"},
	} {
		code, _, stderr := runPipe(t, "", args...)
		want := "pipe " + args[0] + " takes one file; got 2 (a.pipe, b.pipe)\nusage: pipe " + args[0]
		if code != exitErrors || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	code, _, stderr := runPipe(t, "", "plan")
	if code != exitErrors || !strings.Contains(stderr, "pipe plan takes one file; got none") {
		t.Errorf("plan alone: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runPipe(t, "", "export", "a.pipe")
	if code != exitErrors || !strings.Contains(stderr, "give --onnx OUT.onnx or --torchscript OUT.pt") {
		t.Errorf("export without --onnx: exit %d\n%s", code, stderr)
	}
}

// pipe version says which version and commit it was built from, or that
// it does not know; never Go's bare "(devel)".
func TestVersionStamp(t *testing.T) {
	code, stdout, _ := runPipe(t, "", "version")
	if code != exitOK || strings.Contains(stdout, "(devel)") || !strings.Contains(stdout, "commit ") {
		t.Errorf("pipe version: exit %d, %q", code, stdout)
	}
	vcs := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abcdef1234567890abcdef1234567890abcdef12"},
		{Key: "vcs.time", Value: "2026-11-27T10:11:12Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, c := range []struct {
		ver, commit string
		bi          *debug.BuildInfo
		want        string
	}{
		{"", "", nil, "devel (commit unknown)"},
		{"", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "devel (commit unknown) go1.26.8"},
		{"", "", vcs, "devel (commit abcdef123456, 2026-11-27, modified) go1.26.8"},
		{"v0.3.1-4-gabcdef1-dirty", "", vcs, "v0.3.1-4-gabcdef1-dirty (commit abcdef123456, 2026-11-27, modified) go1.26.8"},
		{"v0.3.1", "0123456789abcdef", &debug.BuildInfo{GoVersion: "go1.26.8"}, "v0.3.1 (commit 0123456789ab) go1.26.8"},
		{"", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 (commit unknown) go1.26.8"},
	} {
		if got := readStamp(c.ver, c.commit, c.bi).String(); got != c.want {
			t.Errorf("readStamp(%q, %q): %q, want %q", c.ver, c.commit, got, c.want)
		}
	}
}

// TestReadmePlanExample runs the README's `pipe plan --device` example as
// written: the batch it asks about does not fit, so it exits 3 with the
// largest batch that does; it used to exit 1 on another error of its
// file (a batch over the file's effective_batch).
func TestReadmePlanExample(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "$ pipe plan --device"); ok {
			args = append([]string{"plan", "--device"}, strings.Fields(rest)...)
			break
		}
	}
	if args == nil {
		t.Fatal("the README has no `$ pipe plan --device` example")
	}
	inRoot(t) // the README's paths, and the data's, are the repository's
	code, _, stderr := runPipe(t, "", args...)
	if code != exitNoFit || !strings.Contains(stderr, "does not fit") || !strings.Contains(stderr, "The largest batch that fits is") {
		t.Fatalf("%v: exit %d, want %d (does not fit)\n%s", args, code, exitNoFit, stderr)
	}
}
