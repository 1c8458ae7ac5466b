package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestProfileOf(t *testing.T) {
	for gpu, want := range map[string]string{"NVIDIA H100 80GB HBM3": "h100-80gb", "NVIDIA A100-SXM4-40GB": "a100-40gb",
		"NVIDIA H200": "", "Tesla T4": ""} {
		if got := profileOf(gpu); got != want {
			t.Errorf("profileOf(%q) = %q, want %q", gpu, got, want)
		}
	}
}

// TestComparesEveryRow: every measured row of the repository's second
// H100 JSON is planned again, at its batch, and printed.
func TestComparesEveryRow(t *testing.T) {
	rows, err := compare("../../gpu/nvidia-h100-80gb-hbm3-run2.json", "../../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want the 4 gpucheck rows", len(rows))
	}
	for _, r := range rows {
		if r.Err != "" || r.PlanReserved <= 0 || r.PlanAllocated > r.PlanReserved || r.PlanTotal < r.PlanReserved {
			t.Errorf("%s: plan %+v", r.Example, r)
		}
	}
	var b bytes.Buffer
	write(&b, rows, true)
	if n := strings.Count(b.String(), "\n"); n != 6 {
		t.Errorf("%d lines of Markdown, want a header, a rule and 4 rows:\n%s", n, b.String())
	}
}
