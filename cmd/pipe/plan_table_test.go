package main

import (
	"regexp"
	"strings"
	"testing"
)

// The memory table reads as a table: names flush left, sizes lined up on
// their right edge, and a small model does not "fit in 0%".
func TestPlanMemoryTableAlignment(t *testing.T) {
	fixedHost(t)
	inRoot(t)
	code, stdout, stderr := runPipe(t, "", "plan", "--device", "cpu", "examples/fashion.pipe")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	mem := stdout[strings.Index(stdout, "Memory at batch"):strings.Index(stdout, "\nDecisions")]
	row := regexp.MustCompile(`^  ([a-z][a-z ]*[a-z]) +([0-9.]+ [KMGTP]?i?B)`)
	sizeEnd := -1
	for _, l := range strings.Split(mem, "\n")[1:] {
		if l == "" || strings.HasPrefix(l, "  fits") || strings.HasPrefix(l, "  DOES NOT FIT") {
			continue
		}
		m := row.FindStringSubmatchIndex(l)
		if m == nil {
			t.Fatalf("row %q does not start with its name", l)
		}
		if sizeEnd >= 0 && m[5] != sizeEnd {
			t.Errorf("row %q: its size ends at column %d, the others at %d", l, m[5], sizeEnd)
		}
		sizeEnd = m[5]
	}
	if !strings.Contains(mem, "fits: <1% of the budget") {
		t.Errorf("a model of a few MiB in GiB:\n%s", mem)
	}
}
