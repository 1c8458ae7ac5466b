package main

import (
	"bytes"
	"os"
	"path/filepath"
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

// TestAllocatedWithinToday holds each H100 row's allocated memory to
// max_memory_allocated no worse than the plan of the commit that priced
// cuDNN by pass, layout and dimension (docs/design/gpu-memory-h100.md): a
// term that moves a row away from the device fails here.
func TestAllocatedWithinToday(t *testing.T) {
	bound := map[string]float64{"fashion_mlp": 2.6, "fashion": 2.0, "vit_fashion": 3.8, "volume_unet": 3.7, "resnet50": 0.3}
	for _, f := range []string{"../../gpu/nvidia-h100-80gb-hbm3.json", "../../gpu/nvidia-h100-80gb-hbm3-run2.json"} {
		rows, err := compare(f, "../../..")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			b, ok := bound[r.Example]
			if !ok || r.Err != "" {
				t.Errorf("%s %s: no bound, or the plan failed: %s", f, r.Example, r.Err)
				continue
			}
			e := 100 * float64(r.PlanAllocated-r.MaxAllocated) / float64(r.MaxAllocated)
			if e > b || e < -b {
				t.Errorf("%s %s: allocated %.1f MiB against %.1f measured, %+.1f%%, past ±%.1f%%", f, r.Example, float64(r.PlanAllocated)/(1<<20), float64(r.MaxAllocated)/(1<<20), e, b)
			}
		}
	}
}

// TestRowsPlannedAsTheyRan: a row whose worker reports a captured graph
// is planned with the graph's pool; one that reports eager steps, or
// records nothing of graphs (it predates them), is planned without.
func TestRowsPlannedAsTheyRan(t *testing.T) {
	row := func(extra string) string {
		return `{"example": "fashion_mlp", "batch": 128, "max_reserved_bytes": 146800640, "max_allocated_bytes": 123278336` + extra + `}`
	}
	js := `{"environment": {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130"}, "gpucheck": [` +
		row(`, "cuda_graph": true`) + `, ` +
		row(`, "applied": {"cuda_graph": "captured after 3 eager steps; capturable optimizer"}`) + `, ` +
		row(`, "applied": {"cuda_graph": "eager (capture failed: RuntimeError: x)"}`) + `, ` +
		row(``) + `], "gpucheck_graph_off": [` + row(`, "cuda_graph": false, "applied": {"cuda_graph": "eager (PIPE_TORCH_GRAPH=off)"}`) + `]}`
	f := filepath.Join(t.TempDir(), "nvidia-h100-80gb-hbm3.json")
	if err := os.WriteFile(f, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := compare(f, "../../..")
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, false, false, false}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, r := range rows {
		if r.Err != "" || r.Graph != want[i] || r.PlanGraph != want[i] {
			t.Errorf("row %d: ran with a graph %v, planned with one %v, want %v (%s)", i, r.Graph, r.PlanGraph, want[i], r.Err)
		}
	}
	for i, r := range rows {
		pooled, last := false, false
		for _, tm := range r.Terms {
			pooled = pooled || tm.Pool != ""
			last = last || (strings.HasPrefix(tm.Name, "eager last batch") && tm.Bytes > 0)
		}
		// gpucheck trains full batches only: no eager last batch.
		if pooled != want[i] || last {
			t.Errorf("row %d: terms in the graph's pool %v, want %v; an eager last batch priced %v", i, pooled, want[i], last)
		}
	}
}
