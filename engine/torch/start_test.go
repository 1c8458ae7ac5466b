package torch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStartErrors: a Python that is not there, one without torch, one
// with a torch older than 1.13, and one that dies or crashes before it is
// ready each give an error that names the Python tried and how to point
// pipe at another. One killed from outside (SIGKILL: the OOM killer, or
// kill) is told apart: the error says so and points at no other Python.
func TestStartErrors(t *testing.T) {
	py := testPython(t)
	dir := t.TempDir()
	// A torch package that says it is 1.12.1, in front of no other (-S
	// leaves the system's packages out).
	fake := filepath.Join(dir, "old", "torch")
	for _, sub := range []string{"", "nn", "cuda", "distributed", "version"} {
		os.MkdirAll(filepath.Join(fake, sub), 0o755)
	}
	files := map[string]string{
		"__init__.py": "__version__ = '1.12.1'\nfrom . import nn, cuda, distributed, version\n" +
			"def get_num_threads():\n    return 1\n",
		"nn/__init__.py":          "from . import functional\nclass Module: pass\n",
		"nn/functional.py":        "",
		"cuda/__init__.py":        "def is_available():\n    return False\n",
		"distributed/__init__.py": "def is_available():\n    return False\n",
		"version/__init__.py":     "cuda = None\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(fake, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, python string
		want         []string
		noTorch, old bool
		killed       bool
	}{
		{"missing", filepath.Join(dir, "no-such-python"), []string{"no-such-python", "not found", "--python", "PIPE_PYTHON"}, false, false, false},
		{"without torch", script(t, dir, "python-without-torch", "exec "+py+` -S "$@"`),
			[]string{"python-without-torch", "cannot import torch", "No module named 'torch'", "--python", "PIPE_PYTHON"}, true, false, false},
		{"old torch", script(t, dir, "python-old-torch", "PYTHONPATH="+filepath.Join(dir, "old")+" exec "+py+` -S "$@"`),
			[]string{"python-old-torch", "torch 1.12.1", "1.13 or later", "PIPE_PYTHON"}, false, true, false},
		{"dies", script(t, dir, "python-dies", "echo 'Fatal Python error: broken install' >&2; exit 1"),
			[]string{"python-dies", "exited before it was ready", "Fatal Python error: broken install", "--python"}, false, false, false},
		{"crashes", script(t, dir, "python-crashes", "kill -SEGV $$"),
			[]string{"python-crashes", "exited before it was ready", "segmentation fault", "--python"}, false, false, false},
		{"killed", script(t, dir, "python-killed", "echo 'loading torch' >&2; kill -KILL $$"),
			[]string{"python-killed", "was killed before it was ready", "signal: killed", "not a fault of the Python install", "OOM killer", "loading torch"}, false, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Probe(c.python)
			var se *StartError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a StartError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
			if se.NoTorch != c.noTorch || se.OldTorch != c.old || se.Killed != c.killed {
				t.Errorf("NoTorch %v, OldTorch %v, Killed %v", se.NoTorch, se.OldTorch, se.Killed)
			}
			if c.killed && strings.Contains(err.Error(), "--python") {
				t.Errorf("a killed worker is blamed on its Python:\n%v", err)
			}
		})
	}
	// And the Python that has torch starts.
	info, err := Probe(py)
	if err != nil {
		t.Fatal(err)
	}
	if !versionAtLeast(info.Torch, MinTorch) || info.Executable == "" {
		t.Errorf("probe: %+v", info)
	}
}

// A worker the OOM killer ended says so, and what to do.
func TestStartErrorOOM(t *testing.T) {
	e := &StartError{Python: "python3", Reason: "was killed before it was ready", Err: errors.New("signal: killed"), Killed: true, OOM: true}
	if msg := e.Error(); !strings.Contains(msg, "OOM killer ended it") || !strings.Contains(msg, "free memory") || strings.Contains(msg, "--python") {
		t.Errorf("the OOM killer's worker: %s", msg)
	}
}

func TestVersionAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"1.13.0a0": true, "1.13.1": true, "2.11.0+cu130": true, "1.12.1": false, "0.4.1": false, "1.9.0": false, "10.0": true} {
		if got := versionAtLeast(v, MinTorch); got != want {
			t.Errorf("%s: %v", v, got)
		}
	}
}
