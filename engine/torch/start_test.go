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
// with a torch older than 1.13, and one that dies before it is ready each
// give an error that names the Python tried and how to point pipe at
// another.
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
	}{
		{"missing", filepath.Join(dir, "no-such-python"), []string{"no-such-python", "not found", "--python", "PIPE_PYTHON"}, false, false},
		{"without torch", script(t, dir, "python-without-torch", "exec "+py+` -S "$@"`),
			[]string{"python-without-torch", "cannot import torch", "No module named 'torch'", "--python", "PIPE_PYTHON"}, true, false},
		{"old torch", script(t, dir, "python-old-torch", "PYTHONPATH="+filepath.Join(dir, "old")+" exec "+py+` -S "$@"`),
			[]string{"python-old-torch", "torch 1.12.1", "1.13 or later", "PIPE_PYTHON"}, false, true},
		{"dies", script(t, dir, "python-dies", "echo 'Fatal Python error: broken install' >&2; exit 1"),
			[]string{"python-dies", "exited before it was ready", "Fatal Python error: broken install", "--python"}, false, false},
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
			if se.NoTorch != c.noTorch || se.OldTorch != c.old {
				t.Errorf("NoTorch %v, OldTorch %v", se.NoTorch, se.OldTorch)
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

func TestVersionAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"1.13.0a0": true, "1.13.1": true, "2.11.0+cu130": true, "1.12.1": false, "0.4.1": false, "1.9.0": false, "10.0": true} {
		if got := versionAtLeast(v, MinTorch); got != want {
			t.Errorf("%s: %v", v, got)
		}
	}
}
