package torch

import (
	"os"
	"regexp"
	"testing"

	"pipe/internal/opswitch"
	"pipe/stdlib"
)

// TestArgsNameOps checks that every op in opArgs is a stdlib op, so that
// a misspelt entry fails here.
func TestArgsNameOps(t *testing.T) {
	for op := range opArgs {
		if stdlib.LookupOp(op) == nil {
			t.Errorf("opArgs has %q, which is no stdlib op", op)
		}
	}
}

// TestNoOpSwitch keeps spec.go and args.go free of a switch on op names
// (opArgs is the one list), and net.py's run_node free of tests of the
// op (the forwards register beside their modules, modules.FORWARDS).
func TestNoOpSwitch(t *testing.T) {
	for _, f := range []string{"spec.go", "args.go"} {
		cs, err := opswitch.Cases(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			t.Errorf("%s:%d: case %q; add the op to opArgs instead", f, c.Line, c.Op)
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
