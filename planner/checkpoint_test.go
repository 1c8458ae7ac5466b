package planner

import (
	"fmt"
	"math/rand"
	"pipe/engine/torch"
	"slices"
	"testing"

	"pipe/planner/cost"
	"pipe/planner/plan"
)

// randomChain makes a graph of n nodes in topological order: each node
// reads the one before it, and sometimes an earlier one too (a residual
// add or a U-Net concat), so outputs stay live across segments.
func randomChain(rng *rand.Rand, n int) *chain {
	c := &chain{
		out: make([]int64, n), kept: make([]bool, n), priv: make([]int64, n), flops: make([]int64, n),
		inputs: make([][]int, n), last: make([]int, n), fixed: make([]bool, n),
	}
	for i := range n {
		c.out[i] = int64(1 + rng.Intn(100))
		c.kept[i] = rng.Intn(3) > 0
		if rng.Intn(3) == 0 {
			c.priv[i] = int64(rng.Intn(60))
		}
		c.flops[i] = int64(1 + rng.Intn(1000))
		c.last[i] = -1
		if i > 0 {
			c.inputs[i] = []int{i - 1}
			if i > 2 && rng.Intn(3) == 0 {
				c.inputs[i] = append(c.inputs[i], rng.Intn(i-1))
			}
		}
	}
	c.fixed[0] = true
	for i := range n {
		for _, j := range c.inputs[i] {
			c.last[j] = max(c.last[j], i)
		}
	}
	c.last[n-1] = n
	c.finish()
	return c
}

// plans calls fn with every plan of c: each node after the input is
// stored, starts a segment, or continues the one before it.
func plans(c *chain, fn func([]segment)) {
	n := c.n()
	state := make([]int, n) // 0 stored, 1 starts a segment, 2 continues
	var rec func(i int)
	rec = func(i int) {
		if i == n {
			var segs []segment
			for j := 1; j < n; j++ {
				switch state[j] {
				case 1:
					segs = append(segs, segment{From: j, To: j})
				case 2:
					segs[len(segs)-1].To = j
				}
			}
			fn(segs)
			return
		}
		for s := 0; s < 3; s++ {
			if s == 2 && state[i-1] == 0 {
				continue
			}
			state[i] = s
			rec(i + 1)
		}
	}
	rec(1)
}

// evaluateNaive is chain.evaluate transcribed from the definitions at the
// top of checkpoint.go, term by term and without incremental sums: the
// oracle the programme and evaluate are held to.
func evaluateNaive(c *chain, segs []segment) (peak, kept, extra int64) {
	n := c.n()
	seg := make([]int, n)
	for i := range seg {
		seg[i] = -1
	}
	for k, s := range segs {
		for i := s.From; i <= s.To; i++ {
			seg[i] = k
		}
	}
	readIn := func(i int, s segment) bool {
		for j := s.From; j <= s.To; j++ {
			for _, x := range c.inputs[j] {
				if x == i {
					return true
				}
			}
		}
		return false
	}
	var k, m int64
	next := 0
	for i := 0; i < n; i++ {
		if seg[i] < 0 {
			k = add(k, c.stored(i))
			continue
		}
		if next >= len(segs) || segs[next].To != i {
			continue
		}
		s := segs[next]
		next++
		var out, in, q int64
		for j := s.From; j <= s.To; j++ {
			extra = add(extra, c.flops[j])
			q = add(q, c.priv[j])
			if c.kept[j] {
				if c.last[j] > s.To {
					out = add(out, c.out[j])
				} else {
					q = add(q, c.out[j])
				}
			}
		}
		for j := 0; j < s.From; j++ {
			if c.kept[j] {
				continue
			}
			switch {
			case readIn(j, s):
				in = add(in, c.out[j])
			case c.last[j] > s.To:
				q = add(q, c.out[j])
			}
		}
		k = add(k, add(out, in))
		if v := add(k, q); v > m {
			m = v
		}
	}
	return max(k, m), k, extra
}

// TestEvaluateMatchesDefinitions holds the one-pass evaluate to the
// transcription on random plans of random graphs, some with sizes near
// saturation so that the sums pass math.MaxInt64 on the way.
func TestEvaluateMatchesDefinitions(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for trial := range 300 {
		c := randomChain(rng, 2+rng.Intn(40))
		if trial%5 == 0 {
			for i := range c.out {
				if rng.Intn(4) == 0 {
					c.out[i] = sat/4 + rng.Int63n(sat/4)
				}
			}
			c.finish()
		}
		var segs []segment
		for i := 1; i < c.n(); {
			l := 1 + rng.Intn(4)
			if rng.Intn(2) == 0 {
				segs = append(segs, segment{From: i, To: min(i+l, c.n()) - 1})
			}
			i += l
		}
		p, k, e := c.evaluate(segs)
		wp, wk, we := evaluateNaive(c, segs)
		if p != wp || k != wk || e != we {
			t.Fatalf("trial %d, segments %v: evaluate (%d, %d, %d), the definitions (%d, %d, %d)", trial, segs, p, k, e, wp, wk, we)
		}
	}
}

// TestSolveMatchesBruteForce holds the programme to every plan of small
// graphs: under each budget, no plan that fits recomputes fewer FLOPs.
func TestSolveMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := range 60 {
		n := 3 + rng.Intn(7)
		c := randomChain(rng, n)
		base := c.baseline()
		var all [][]segment
		plans(c, func(s []segment) { all = append(all, append([]segment(nil), s...)) })
		minPeak := base
		for _, s := range all {
			if p, _, _ := evaluateNaive(c, s); p < minPeak {
				minPeak = p
			}
		}
		if got := c.minPeak(); got != minPeak {
			t.Fatalf("trial %d: minPeak = %d, brute force %d", trial, got, minPeak)
		}
		for _, budget := range []int64{minPeak - 1, minPeak, (minPeak + base) / 2, base - 1, base, base + 10} {
			best := int64(-1)
			for _, s := range all {
				p, _, e := evaluateNaive(c, s)
				if p <= budget && (best < 0 || e < best) {
					best = e
				}
			}
			r, ok := c.solve(budget)
			if ok != (best >= 0) {
				t.Fatalf("trial %d (n=%d) budget %d: solve found a plan: %v, brute force: %v", trial, n, budget, ok, best >= 0)
			}
			if !ok {
				continue
			}
			if r.Extra != best {
				t.Fatalf("trial %d (n=%d) budget %d: solve recomputes %d FLOPs (%v), brute force %d", trial, n, budget, r.Extra, r.Segments, best)
			}
			if r.Peak > budget {
				t.Fatalf("trial %d: solve's plan peaks at %d over the budget %d", trial, r.Peak, budget)
			}
			if r.Peak > base {
				t.Fatalf("trial %d: checkpointing raised the peak from %d to %d", trial, base, r.Peak)
			}
			if !r.Exact {
				t.Fatalf("trial %d: the front was thinned on a small graph", trial)
			}
		}
	}
}

// TestThinnedMatchesBruteForce holds the programme over thinned cuts to
// every plan whose segments start and end at cuts, on small graphs cut to
// a few positions: it is optimal among those, and says it is not proven
// optimal overall.
func TestThinnedMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	for trial := range 60 {
		n := 6 + rng.Intn(5)
		c := randomChain(rng, n)
		c.thin(4 + rng.Intn(3))
		if !c.thinned || c.cuts[0] != 0 || c.cuts[len(c.cuts)-1] != n || c.cuts[1] != 1 {
			t.Fatalf("trial %d: n=%d cuts %v", trial, n, c.cuts)
		}
		onCut := map[int]bool{}
		for _, p := range c.cuts {
			onCut[p] = true
		}
		var all [][]segment
		plans(c, func(segs []segment) {
			for _, s := range segs {
				if !onCut[s.From] || !onCut[s.To+1] {
					return
				}
			}
			all = append(all, append([]segment(nil), segs...))
		})
		base := c.baseline()
		minPeak := base
		for _, s := range all {
			if p, _, _ := evaluateNaive(c, s); p < minPeak {
				minPeak = p
			}
		}
		if got := c.minPeak(); got != minPeak {
			t.Fatalf("trial %d (cuts %v): minPeak = %d, brute force over the cuts %d", trial, c.cuts, got, minPeak)
		}
		for _, budget := range []int64{minPeak - 1, minPeak, (minPeak + base) / 2, base} {
			best := int64(-1)
			for _, s := range all {
				p, _, e := evaluateNaive(c, s)
				if p <= budget && (best < 0 || e < best) {
					best = e
				}
			}
			r, ok := c.solve(budget)
			if ok != (best >= 0) || ok && r.Extra != best {
				t.Fatalf("trial %d (cuts %v) budget %d: solve %v %d FLOPs (%v), brute force %d", trial, c.cuts, budget, ok, r.Extra, r.Segments, best)
			}
			if ok && (r.Exact || r.Peak > budget) {
				t.Fatalf("trial %d: a thinned plan says exact %v, peaks at %d under %d", trial, r.Exact, r.Peak, budget)
			}
			for _, s := range r.Segments {
				if !onCut[s.From] || !onCut[s.To+1] {
					t.Fatalf("trial %d: segment %v is not on the cuts %v", trial, s, c.cuts)
				}
			}
		}
	}
}

// TestThinCuts: a long graph gets about maxCuts cuts, with the input cut
// out on both sides, and a short one every position.
func TestThinCuts(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, n := range []int{maxCuts - 1, maxCuts, 3*maxCuts + 7, 20003} {
		c := randomChain(rng, n)
		if c.thinned != (n+1 > maxCuts) || len(c.cuts) > maxCuts {
			t.Errorf("n=%d: thinned %v, %d cuts", n, c.thinned, len(c.cuts))
		}
		if c.thinned && len(c.cuts) < maxCuts*3/4 {
			t.Errorf("n=%d: only %d cuts", n, len(c.cuts))
		}
		if c.cuts[0] != 0 || c.cuts[1] != 1 || c.cuts[len(c.cuts)-1] != n || !slices.IsSorted(c.cuts) {
			t.Errorf("n=%d: cuts start %v, end %d", n, c.cuts[:2], c.cuts[len(c.cuts)-1])
		}
	}
}

// TestSegStatsMatchesEvaluate checks the incremental segment sums against
// the definitions for every single-segment plan.
func TestSegStatsMatchesEvaluate(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for range 40 {
		c := randomChain(rng, 4+rng.Intn(12))
		var stored int64
		for l := 1; l < c.n(); l++ {
			stored += c.stored(l - 1)
			c.segStats(l, func(r int, cost, q, flops int64) bool {
				var after int64
				for i := r + 1; i < c.n(); i++ {
					after += c.stored(i)
				}
				peak, kept, extra := evaluateNaive(c, []segment{{From: l, To: r}})
				want := stored + cost
				if kept-after != want {
					t.Fatalf("[%d, %d]: kept before and in the segment %d, incremental %d", l, r, kept-after, want)
				}
				if extra != flops {
					t.Fatalf("[%d, %d]: extra %d, incremental %d", l, r, extra, flops)
				}
				if p := max(kept, want+q); p != peak {
					t.Fatalf("[%d, %d]: peak %d, incremental %d", l, r, peak, p)
				}
				return true
			})
		}
	}
}

// equalSegments is Chen et al.'s rule: k segments of (nearly) equal length
// covering every node after the input.
func equalSegments(n, k int) []segment {
	var segs []segment
	m := n - 1
	for j := range k {
		from, to := 1+j*m/k, (j+1)*m/k
		if from <= to {
			segs = append(segs, segment{From: from, To: to})
		}
	}
	return segs
}

// TestSolveBeatsEqualSegments compares the programme with equal-size
// segments under the same budgets, on graphs with skips.
func TestSolveBeatsEqualSegments(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := range 8 {
		c := randomChain(rng, 40+rng.Intn(40))
		base := c.baseline()
		low := c.minPeak()
		for step := 0; step <= 4; step++ {
			budget := low + (base-low)*int64(step)/4
			r, ok := c.solve(budget)
			if !ok {
				t.Fatalf("trial %d: no plan under %d though the least peak is %d", trial, budget, low)
			}
			for k := 1; k < c.n(); k++ {
				p, _, e := c.evaluate(equalSegments(c.n(), k))
				if p <= budget && e < r.Extra {
					t.Fatalf("trial %d budget %d: %d equal segments recompute %d FLOPs, the programme %d", trial, budget, k, e, r.Extra)
				}
			}
		}
	}
}

// TestSolveOnDeepChain checks the programme reaches the budget it is given
// on a 300-node random chain, whose byte-sized costs make its fronts wide.
func TestSolveOnDeepChain(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	c := randomChain(rng, 300)
	base, low := c.baseline(), c.minPeak()
	if low >= base {
		t.Fatalf("checkpointing saves nothing on a deep chain: least peak %d, baseline %d", low, base)
	}
	for _, budget := range []int64{low, (low + base) / 2} {
		r, ok := c.solve(budget)
		if !ok || r.Peak > budget {
			t.Fatalf("budget %d: ok=%v peak=%d", budget, ok, r.Peak)
		}
	}
}

// TestSolveOnModels runs the programme on real models (a U-Net with a
// ResNet-50 encoder, DeepLabV3+, ViT-L/16, the examples' U-Nets and
// ResNet-18) under budgets from the least peak to the baseline: every plan
// fits its budget, never raises the peak, and recomputes no more than any
// count of equal-size segments that fits the same budget.
func TestSolveOnModels(t *testing.T) {
	files := []string{"../bench/unet_resnet50.pipe", "../bench/deeplabv3plus_resnet101.pipe", "../bench/vit_l16.pipe",
		"../examples/cells.pipe", "../examples/olinda.pipe", "../examples/pills.pipe", "../examples/resblock.pipe"}
	for _, f := range files {
		prog, _ := load(t, f, f)
		g, ds := prog.Graph(prog.Spec.Models[0].Name)
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		m := newCostModel(torch.Cost{}, g, cost.Setup{Device: plan.BackendGPU, Precision: plan.Precision{ActivationBytes: 2, Mixed: true}, Loss: "cross_entropy"}, 2, 8)
		c := m.ch
		base, low := c.baseline(), c.minPeak()
		if low >= base {
			t.Errorf("%s: checkpointing saves nothing (least peak %d, baseline %d)", f, low, base)
		}
		for step := int64(0); step <= 4; step++ {
			budget := low + (base-low)*step/4
			r, ok := c.solve(budget)
			if !ok {
				t.Fatalf("%s: no plan under %d bytes, though the least peak is %d", f, budget, low)
			}
			if r.Peak > budget || r.Peak > base {
				t.Fatalf("%s: the plan peaks at %d, over the budget %d or the baseline %d", f, r.Peak, budget, base)
			}
			for k := 1; k < c.n(); k++ {
				p, _, e := c.evaluate(equalSegments(c.n(), k))
				if p <= budget && e < r.Extra {
					t.Errorf("%s budget %d: %d equal segments recompute %d FLOPs, the programme %d", f, budget, k, e, r.Extra)
				}
			}
		}
	}
}

func ExampleFormatBytes() {
	fmt.Println(FormatBytes(512), FormatBytes(1536), FormatBytes(13314398618), FormatBytes(sat))
	// Output: 512 B 1.5 KiB 12.4 GiB ≥ 8 EiB
}
