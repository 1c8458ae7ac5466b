package engine_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestEnginesAreSiblings keeps the engines siblings under the contract:
// neither imports the other, nor the run loop, the orchestration or the
// command line, and the contract imports no engine. The run loop imports
// no engine either: it is given a Backend.
func TestEnginesAreSiblings(t *testing.T) {
	banned := map[string][]string{
		"pipe/engine":         {"pipe/engine/native", "pipe/engine/torch", "pipe/run", "pipe/workflow", "pipe/cmd"},
		"pipe/engine/native":  {"pipe/engine/torch", "pipe/run", "pipe/workflow", "pipe/cmd"},
		"pipe/engine/torch":   {"pipe/engine/native", "pipe/run", "pipe/workflow", "pipe/cmd"},
		"pipe/engine/weights": {"pipe/engine/native", "pipe/engine/torch", "pipe/run"},
		"pipe/run":            {"pipe/engine/native", "pipe/engine/torch", "pipe/workflow", "pipe/cmd"},
	}
	for pkg, bad := range banned {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for _, b := range bad {
			if slices.Contains(deps, b) {
				t.Errorf("%s depends on %s", pkg, b)
			}
		}
	}
}
