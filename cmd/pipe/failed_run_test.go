package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run that fails before it trains leaves none of the folders it made in
// the current directory: here the torch engine's Python is missing, which
// pipe run finds once the run's folder is placed (out/NAME/runs/STAMP).
func TestAFailedRunLeavesNoOutFolder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	src := `pipeline blobs
source train synthetic { samples 32  shape [4]  classes 2  seed 1 }
model m { input [4]  dense 2 }
train { epochs 1  batch 8  optimizer sgd lr 0.1  loss cross_entropy }
`
	if err := os.WriteFile("blobs.pipe", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runPipe(t, "", "run", "--engine", "torch", "--python", filepath.Join(dir, "no-python"), "blobs.pipe")
	if code == exitOK || !strings.Contains(stderr, "Python") {
		t.Fatalf("a run with no Python: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat("out"); err == nil {
		var left []string
		filepath.WalkDir("out", func(p string, _ os.DirEntry, _ error) error { left = append(left, p); return nil })
		t.Errorf("the failed run left %v", left)
	}
}
