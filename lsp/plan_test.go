package lsp

import (
	"context"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/engine/costs"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/planner"
	"pipe/stdlib"
)

// TestHoverFromThePlanner runs the real planner for a file that names its
// device, and checks that hover shows the plan's figures for that device.
func TestHoverFromThePlanner(t *testing.T) {
	host := planner.HostInfo{MemTotal: 64 << 30, MemAvailable: 32 << 30, Cores: 8}
	plan := func(ctx context.Context, p *lang.Program) (*Costs, diag.Diagnostics) {
		pl, ds := planner.Plan(progtest.Decoded(t, p), planner.WithCosts(costs.Engines()...), planner.WithHost(host))
		return CostsFromPlan(p, pl), ds
	}
	a := &analyzer{schema: stdlib.Schema(), planner: plan, log: testAnalyzer(t).log}
	src := "device a100-40gb\nprecision bf16\n" + examples(t)["lowrank.pipe"]
	an := a.plan(context.Background(), a.check("lowrank.pipe", 1, src))
	if an.diags.HasErrors() {
		t.Fatalf("plan: %v", an.diags)
	}
	if !an.planned || an.costs == nil || an.costs.Device != "a100-40gb" || an.costs.Batch <= 0 {
		t.Fatalf("costs %+v", an.costs)
	}
	md := describeAt(stdlib.Schema(), an, strings.Index(src, "dense 10"))
	for _, want := range []string{"**dense**", "`[10]`", "parameters: 20,490", "a100-40gb, 40.0 GiB", "bf16"} {
		if !strings.Contains(md, want) {
			t.Errorf("hover lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "From the model's graph") {
		t.Errorf("hover says it has no plan:\n%s", md)
	}
	// Inside the repeat: two copies of the call.
	md = describeAt(stdlib.Schema(), an, strings.Index(src, "2 * (lowrank_dense")+5)
	if !strings.Contains(md, "over 2 copies") {
		t.Errorf("hover in a repeat:\n%s", md)
	}
}

// TestCancelledPlanIsDropped runs the real planner under a context that a
// newer version already cancelled: the planner stops at once with its
// cancelled diagnostic, and the analysis is dropped, not published.
func TestCancelledPlanIsDropped(t *testing.T) {
	var got diag.Diagnostics
	plan := func(ctx context.Context, p *lang.Program) (*Costs, diag.Diagnostics) {
		pl, ds := planner.Plan(progtest.Decoded(t, p), planner.WithCosts(costs.Engines()...), planner.WithHost(planner.HostInfo{MemTotal: 64 << 30, MemAvailable: 32 << 30, Cores: 8}), planner.WithContext(ctx))
		got = ds
		return CostsFromPlan(p, pl), ds
	}
	a := &analyzer{schema: stdlib.Schema(), planner: plan, log: testAnalyzer(t).log}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if an := a.plan(ctx, a.check("lowrank.pipe", 1, examples(t)["lowrank.pipe"])); an != nil {
		t.Errorf("a cancelled analysis was kept: %+v", an.diags)
	}
	if len(got) != 1 || got[0].Code != planner.CodeCancelled {
		t.Errorf("the planner said %v", got)
	}
}
