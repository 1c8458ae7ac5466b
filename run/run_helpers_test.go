package run_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/engine/enginetest"

	"pipe/diag"
	"pipe/engine/costs"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/stdlib"
)

// job is a decoded program and its plan, as pipe run makes them.
type job struct {
	prog *stdlib.Program
	plan *plan.Plan
	src  []byte
	dir  string
}

var testHost = planner.HostInfo{MemTotal: 24 << 30, MemAvailable: 24 << 30, Cores: 2}

// newJob checks and plans src for the CPU; dir is a fresh folder the
// source's relative paths are resolved against.
func newJob(t *testing.T, src string) *job {
	t.Helper()
	dir := t.TempDir()
	b := []byte(src)
	f, ds := lang.Parse("test.pipe", b)
	prog, cds := lang.Check(f, stdlib.Schema())
	ds = append(ds, cds...)
	if ds.HasErrors() {
		t.Fatalf("the test program does not check:\n%v", ds)
	}
	dec, dds := stdlib.Decode(prog)
	if dds.HasErrors() {
		t.Fatalf("the test program does not decode:\n%v", dds)
	}
	p, pds := planner.Plan(dec, planner.WithCosts(costs.Engines()...), planner.WithSource(b), planner.WithHost(testHost), planner.WithDevice("cpu"))
	if pds.HasErrors() || p == nil {
		t.Fatalf("the test program does not plan:\n%v", pds)
	}
	return &job{prog: dec, plan: p, src: b, dir: dir}
}

// run runs the job with the fake backend and the options given; the
// checkpoints go to dir/ckpt.
func (j *job) run(t *testing.T, ctx context.Context, be *enginetest.Backend, hooks run.Hooks, opts ...run.Option) (*run.Result, diag.Diagnostics) {
	t.Helper()
	if be == nil {
		be = &enginetest.Backend{}
	}
	all := append([]run.Option{run.WithBackend(be), run.WithBase(j.dir), run.WithCheckpointDir(filepath.Join(j.dir, "ckpt"))}, opts...)
	return run.Run(ctx, j.plan, j.prog, hooks, all...)
}

func mustRun(t *testing.T, j *job, be *enginetest.Backend, opts ...run.Option) *run.Result {
	t.Helper()
	res, ds := j.run(t, context.Background(), be, run.Hooks{}, opts...)
	if ds.HasErrors() {
		t.Fatalf("run failed:\n%v", ds)
	}
	return res
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// findDiag returns the first diagnostic with the code, or fails.
func findDiag(t *testing.T, ds diag.Diagnostics, code string) *diag.Diagnostic {
	t.Helper()
	for _, d := range ds {
		if d.Code == code {
			return d
		}
	}
	t.Fatalf("no %s diagnostic in:\n%v", code, ds)
	return nil
}

// lineOf is the 1-based line of the first line of src containing s.
func lineOf(src, s string) int {
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	return 0
}
