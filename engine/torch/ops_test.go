package torch

import (
	"os"
	"regexp"
	"testing"

	"pipe/internal/opswitch"
	"pipe/stdlib"
)

// TestOpsNameOps checks that every op in torchOps is a stdlib op, so that
// a misspelt entry fails here, and that each has its settings and a rule
// for what it saves.
func TestOpsNameOps(t *testing.T) {
	for name, op := range torchOps {
		if stdlib.LookupOp(name) == nil {
			t.Errorf("torchOps has %q, which is no stdlib op", name)
		}
		if op.args == nil || op.saved == nil {
			t.Errorf("torchOps[%q] lacks its settings or its saved-tensor rule", name)
		}
	}
}

// TestNoOpSwitch keeps the engine's Go files free of a switch on op names
// (torchOps is the one list), and net.py's run_node free of tests of the
// op (the forwards register beside their modules, modules.FORWARDS).
func TestNoOpSwitch(t *testing.T) {
	for _, f := range []string{"spec.go", "ops.go", "cost_saved.go", "cost_gpu.go"} {
		cs, err := opswitch.Cases(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			t.Errorf("%s:%d: case %q; add the op to torchOps instead", f, c.Line, c.Op)
		}
	}
	py, err := os.ReadFile("pipe_torch/net.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\bop (==|in) [^\n]*`).FindAll(py, -1) {
		t.Errorf("net.py tests the op (%s); register a forward in modules.py instead", m)
	}
}
