package native

import (
	"slices"
	"strings"
	"testing"
	"time"

	"pipe/engine"
)

// countingClock replaces the profile's clock with one that counts its
// readings and moves a microsecond each time, so that every span is
// positive whatever the machine's clock does.
func countingClock(t *testing.T) *int {
	t.Helper()
	n := 0
	base := time.Now()
	now = func() time.Time { n++; return base.Add(time.Duration(n) * time.Microsecond) }
	t.Cleanup(func() { now = time.Now })
	return &n
}

// TestProfileSpans trains the Fashion CNN (fused, and with a
// checkpoint segment) with profiling on: every unit has one forward span
// per step, every unit that takes gradients one backward span, a fused
// unit's span names all its nodes, recomputed units have recompute
// spans, and the loss has one. Eval has forward spans only.
func TestProfileSpans(t *testing.T) {
	var _ engine.Profiler = (*model)(nil)
	clock := countingClock(t)
	g := exampleGraph(t, "fashion.pipe")
	cfg := cfgOf(4, "cross_entropy", "adam")
	cfg.Fusion = fuseAll(g)
	cfg.Folds = foldsOf(g)
	cfg.Checkpoint = []engine.Segment{{From: 5, To: 8}}
	m := mustBuild(t, g, cfg)
	m.EnableProfile(true)
	b := randomBatch(m, 4, 1)
	m.ZeroGrad()
	if _, err := m.TrainStep(b, 1); err != nil {
		t.Fatal(err)
	}
	spans := m.Profile()
	if again := m.Profile(); len(again) != 0 {
		t.Errorf("Profile kept %d spans after returning them", len(again))
	}
	count := map[engine.Phase]map[string]int{}
	for _, s := range spans {
		if s.Dur <= 0 {
			t.Errorf("%v %v: duration %v", s.Nodes, s.Phase, s.Dur)
		}
		if count[s.Phase] == nil {
			count[s.Phase] = map[string]int{}
		}
		count[s.Phase][strings.Join(s.Nodes, "+")]++
	}
	if count[engine.PhaseLoss][""] != 1 {
		t.Errorf("loss spans: %v", count[engine.PhaseLoss])
	}
	fused := 0
	for _, u := range m.units {
		name := strings.Join(namesOf(u), "+")
		if got := count[engine.PhaseForward][name]; got != 1 {
			t.Errorf("%s: %d forward spans", name, got)
		}
		wantB := 0
		if u.reqGrad && !u.skipBwd && u.idx > 0 {
			wantB = 1
		}
		if got := count[engine.PhaseBackward][name]; got != wantB {
			t.Errorf("%s: %d backward spans, want %d", name, got, wantB)
		}
		if u.seg >= 0 && count[engine.PhaseRecompute][name] != 1 {
			t.Errorf("%s is recomputed but has %d recompute spans", name, count[engine.PhaseRecompute][name])
		}
		if len(u.nodes) > 1 {
			fused++
		}
	}
	if fused == 0 || len(count[engine.PhaseRecompute]) == 0 {
		t.Fatalf("the model has %d fused units and %d recomputed: the test covers neither", fused, len(count[engine.PhaseRecompute]))
	}
	// Spans follow each other in the order they ran.
	for i := 1; i < len(spans); i++ {
		if spans[i].Start.Before(spans[i-1].Start.Add(spans[i-1].Dur)) {
			t.Errorf("span %d starts before span %d ends", i, i-1)
		}
	}
	if *clock != 2*len(spans) {
		t.Errorf("the clock was read %d times for %d spans", *clock, len(spans))
	}

	out := make([]float32, 4*10)
	if _, err := m.Eval(b, out); err != nil {
		t.Fatal(err)
	}
	ev := m.Profile()
	fwd := 0
	for _, s := range ev {
		switch s.Phase {
		case engine.PhaseForward:
			fwd++
		case engine.PhaseLoss:
		default:
			t.Errorf("Eval timed a %s pass of %v", s.Phase, s.Nodes)
		}
	}
	if fwd != len(m.units) {
		t.Errorf("Eval: %d forward spans for %d units", fwd, len(m.units))
	}
}

// TestProfileOff checks that a model that was never asked to profile,
// or was asked to stop, reads no clock and returns no spans.
func TestProfileOff(t *testing.T) {
	clock := countingClock(t)
	g := exampleGraph(t, "fashion.pipe")
	cfg := cfgOf(4, "cross_entropy", "adam")
	cfg.Fusion = fuseAll(g)
	m := mustBuild(t, g, cfg)
	step := func() {
		b := randomBatch(m, 4, 1)
		m.ZeroGrad()
		if _, err := m.TrainStep(b, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Eval(b, nil); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if *clock != 0 || len(m.Profile()) != 0 {
		t.Errorf("profiling never turned on: the clock was read %d times", *clock)
	}
	m.EnableProfile(true)
	step()
	if *clock == 0 {
		t.Fatal("profiling on: the clock was never read")
	}
	m.EnableProfile(false)
	*clock = 0
	step()
	if *clock != 0 || len(m.Profile()) != 0 {
		t.Errorf("profiling turned off: the clock was read %d times", *clock)
	}
}

func namesOf(u *unit) []string {
	var out []string
	for _, n := range u.nodes {
		out = append(out, n.Name)
	}
	return slices.Clip(out)
}
