package native

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"pipe/engine"
)

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// TestThreadsTable prints, per unit of a training step, on 1 and on 2
// threads (the two builds run alternately): the least wall time and the
// median process CPU time over the rounds; and, on 2 threads, the
// critical path taken from each thread's own CPU time (the caller's time
// outside the pool's runs, plus the longer worker share of each run), its
// serial part, the difference between the two shares summed over the
// runs, and the number of runs (fork-joins). Load on the machine
// stretches wall time but hardly these. It asserts nothing, and runs
// only when PIPE_THREADS_TABLE names a model (fashion or unet);
// PIPE_THREADS_RUNS=NAME prints each run's two shares for the units
// whose name holds NAME (docs/design/native-threads.md).
//
//	PIPE_THREADS_TABLE=fashion go test ./engine/native -run ThreadsTable -v
func TestThreadsTable(t *testing.T) {
	which := os.Getenv("PIPE_THREADS_TABLE")
	if which == "" {
		t.Skip("set PIPE_THREADS_TABLE=fashion or unet")
	}
	file, batch, loss, opt := "fashion.pipe", 64, "cross_entropy", "adam"
	if which == "unet" {
		file, batch, loss, opt = "../bench/models/unet_small.pipe", 8, "mse", "adamw"
	}
	rounds, _ := strconv.Atoi(os.Getenv("PIPE_THREADS_ROUNDS"))
	if rounds == 0 {
		rounds = 40
	}
	g := exampleGraph(t, file)
	type rec struct {
		wall, cpu, crit, serial, imb map[string][]time.Duration
		runs                         map[string]int
	}
	var models [2]*model
	var recs [2]rec
	var order []string
	seen := map[string]bool{}
	for i, th := range []int{1, 2} {
		cfg := cfgOf(batch, loss, opt)
		if opt == "adamw" {
			cfg.Optimizer.WeightDecay = 0.01
		}
		cfg.Fusion, cfg.Folds, cfg.Threads = fuseAll(g), foldsOf(g), th
		models[i] = mustBuild(t, g, cfg)
		recs[i] = rec{map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{},
			map[string][]time.Duration{}, map[string][]time.Duration{}, map[string]int{}}
	}
	bt := randomBatch(models[0], batch, 1)
	key := func(s engine.Span) string {
		name := "loss"
		if s.Nodes != nil {
			name = strings.Join(s.Nodes, "+")
		}
		return fmt.Sprintf("%s %s", s.Phase, name)
	}
	var lastSpans []engine.Span
	step := func(m *model, r rec, clock func() time.Time, into map[string][]time.Duration) {
		now = clock
		defer func() { now = time.Now }()
		m.EnableProfile(true)
		t0 := clock()
		m.ZeroGrad()
		t1 := clock()
		if _, err := m.TrainStep(bt, 1); err != nil {
			t.Fatal(err)
		}
		t2 := clock()
		if err := m.Step(1e-3); err != nil {
			t.Fatal(err)
		}
		t3 := clock()
		spans := m.Profile()
		lastSpans = spans
		m.EnableProfile(false)
		add := func(k string, d time.Duration) {
			into[k] = append(into[k], d)
			if !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
		}
		add("zero_grad", t1.Sub(t0))
		var sum time.Duration
		for _, s := range spans {
			add(key(s), s.Dur)
			sum += s.Dur
		}
		add("step (rest)", t2.Sub(t1)-sum)
		add("optimizer", t3.Sub(t2))
		add("TOTAL", t3.Sub(t0))
	}
	cpuClock := func() time.Time { return time.Unix(0, int64(cpuTime())) }
	for i := 0; i < 3; i++ {
		for j := range models {
			step(models[j], recs[j], time.Now, map[string][]time.Duration{})
		}
	}
	for i := 0; i < rounds; i++ {
		for j := range models {
			step(models[j], recs[j], time.Now, recs[j].wall)
			step(models[j], recs[j], cpuClock, recs[j].cpu)
		}
	}
	// The critical path on 2 threads, from each thread's own CPU time: the
	// caller's time in a unit outside the pool's runs, plus, for each run,
	// the longer of the two workers' shares. Load on the machine stretches
	// wall time but not these.
	crit := func(m *model, r rec) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var shares [2][]time.Duration
		poolShare = func(w int) func() {
			t0 := threadCPU()
			return func() { shares[w] = append(shares[w], threadCPU()-t0) }
		}
		defer func() { poolShare = nil }()
		snap := map[int64]int{}
		clock := func() time.Time {
			t := threadCPU()
			snap[int64(t)] = len(shares[0])
			return time.Unix(0, int64(t))
		}
		into := map[string][]time.Duration{}
		step(m, r, clock, into)
		r.runs["TOTAL"] = len(shares[0])
		for _, sp := range lastSpans {
			a, b := snap[sp.Start.UnixNano()], snap[sp.Start.Add(sp.Dur).UnixNano()]
			k := key(sp)
			var own, long, imb time.Duration
			for i := a; i < b; i++ {
				s0, s1 := shares[0][i], shares[1][i]
				own += s0
				long += max(s0, s1)
				imb += max(s0, s1) - min(s0, s1)
			}
			if os.Getenv("PIPE_THREADS_RUNS") != "" && strings.Contains(k, os.Getenv("PIPE_THREADS_RUNS")) {
				var sb strings.Builder
				for i := a; i < snap[sp.Start.Add(sp.Dur).UnixNano()]; i++ {
					fmt.Fprintf(&sb, " %.2f/%.2f", float64(shares[0][i])/1e6, float64(shares[1][i])/1e6)
				}
				fmt.Printf("%s: dur %.2f runs%s\n", k, float64(sp.Dur)/1e6, sb.String())
			}
			r.runs[k] = b - a
			r.crit[k] = append(r.crit[k], sp.Dur-own+long)
			r.serial[k] = append(r.serial[k], sp.Dur-own)
			r.imb[k] = append(r.imb[k], imb)
		}
	}
	for i := 0; i < rounds; i++ {
		crit(models[1], recs[1])
	}
	minOf := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
		return s[0]
	}
	med := func(d []time.Duration) time.Duration {
		if len(d) == 0 {
			return 0
		}
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
		return s[len(s)/2]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }
	fmt.Printf("| unit | wall 1t | wall 2t | cpu 1t | cpu 2t | critical 2t | serial 2t | imbalance 2t | cpu 1t / critical | runs |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		w1, w2 := minOf(recs[0].wall[k]), minOf(recs[1].wall[k])
		c1, cr := med(recs[0].cpu[k]), med(recs[1].crit[k])
		if len(recs[1].crit[k]) == 0 {
			fmt.Printf("| %s | %s | %s | %s | %s | | | | | %d |\n", k, ms(w1), ms(w2), ms(c1), ms(med(recs[1].cpu[k])), recs[1].runs[k])
			continue
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %d |\n", k, ms(w1), ms(w2), ms(c1), ms(med(recs[1].cpu[k])),
			ms(cr), ms(med(recs[1].serial[k])), ms(med(recs[1].imb[k])), float64(c1)/float64(max(cr, 1)), recs[1].runs[k])
	}
}
