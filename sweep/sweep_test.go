package sweep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"pipe/lang"
)

var testParams = []lang.SweepParam{
	{Path: "train.lr", Kind: "loguniform", Low: 1e-5, High: 1},
	{Path: "model.m.dropout.p", Kind: "uniform", Low: 0, High: 0.5},
	{Path: "model.m.dense[0].units", Kind: "int", Low: 8, High: 512, Log: true},
	{Path: "train.optimizer", Kind: "choice", Choices: []string{"adam", "sgd", "adamw"}},
}

// TestRandomStaysInRange: every value drawn is in its range, an int is
// an integer, a choice one of its values.
func TestRandomStaysInRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		v := Random{}.Suggest(testParams, nil, rng)
		for i, p := range testParams {
			if p.Kind == "choice" {
				if _, ok := unformat(p, v[i]); !ok {
					t.Fatalf("%s: %q is no choice", p.Path, v[i])
				}
				continue
			}
			x, err := strconv.ParseFloat(v[i], 64)
			if err != nil || x < p.Low || x > p.High || (p.Kind == "int" && x != math.Trunc(x)) {
				t.Fatalf("%s: %q outside [%g, %g]", p.Path, v[i], p.Low, p.High)
			}
		}
	}
}

// objective is a made-up loss: best at lr 1e-2, dropout 0.1, 64 units
// and adamw.
func objective(v []string) float64 {
	lr, _ := strconv.ParseFloat(v[0], 64)
	p, _ := strconv.ParseFloat(v[1], 64)
	u, _ := strconv.ParseFloat(v[2], 64)
	d, w := math.Log10(lr)+2, math.Log2(u)-6
	s := d*d + 40*(p-0.1)*(p-0.1) + w*w/4
	if v[3] != "adamw" {
		s += 1
	}
	return s
}

// TestTPEFindsBetterThanRandom: over the same number of trials and seeds,
// TPE's best and its later trials score better than random's on a
// smooth objective (an average over seeds, so no one seed decides).
func TestTPEFindsBetterThanRandom(t *testing.T) {
	mean := func(s Sampler) (best, late float64) {
		const seeds, trials = 20, 40
		for seed := range seeds {
			var hist []Observation
			b := math.Inf(1)
			for id := range trials {
				rng := TrialRand(uint64(seed), id)
				v := s.Suggest(testParams, hist, rng)
				sc := objective(v)
				hist = append(hist, Observation{Values: v, Score: sc})
				b = math.Min(b, sc)
				if id >= trials-10 {
					late += sc / (10 * seeds)
				}
			}
			best += b / seeds
		}
		return best, late
	}
	rb, rl := mean(Random{})
	tb, tl := mean(TPE{Startup: 8, Gamma: 0.25})
	t.Logf("random: best %.3f, last ten %.3f; tpe: best %.3f, last ten %.3f", rb, rl, tb, tl)
	if !(tb < rb) || !(tl < rl/2) {
		t.Errorf("tpe best %.3f, last ten %.3f; random %.3f, %.3f", tb, tl, rb, rl)
	}
}

// TestASHA: at a rung a trial goes on only in the top 1/eta of those
// that reached it; the first always goes on; epochs between rungs never
// stop.
func TestASHA(t *testing.T) {
	a := ASHA{Rung: 1, Eta: 3}
	for e, want := range map[int]bool{1: true, 2: false, 3: true, 4: false, 9: true} {
		if a.IsRung(e) != want {
			t.Errorf("IsRung(%d) = %v", e, !want)
		}
	}
	seen := map[int][]float64{}
	if stop, _ := a.Stop(1, 1, 5, seen); stop {
		t.Error("the first at a rung was stopped")
	}
	seen[1] = []float64{5}
	if stop, _ := a.Stop(2, 1, 4, seen); stop {
		t.Error("a better second was stopped")
	}
	seen[2] = []float64{4}
	if stop, _ := a.Stop(3, 1, 6, seen); !stop {
		t.Error("the worst of three went on (top 1 of 3)")
	}
	seen[3] = []float64{6}
	// Four at the rung: the top 2 go on.
	if stop, _ := a.Stop(4, 1, 4.5, seen); stop {
		t.Error("the second best of four was stopped")
	}
	if stop, _ := a.Stop(4, 2, 100, map[int][]float64{1: {1, 1}}); stop {
		t.Error("stopped between rungs")
	}
}

// fakeLauncher runs trials in goroutines: each epoch's metric is the
// objective's, the trial waits for the controller's answer as pipe run
// --sweep-gate does, and a trial named in noFit is refused by the plan.
type fakeLauncher struct {
	mu       sync.Mutex
	epochs   int
	starts   map[int]int
	cancelAt int // cancel the sweep after this many trials ended (0: never)
	ended    int
	cancel   func()
}

type fakeProc struct {
	t       *Trial
	from    int
	epochs  int
	score   float64
	answers chan bool
	next    int
	stopped bool
	// awaiting is set while an epoch's answer is due.
	awaiting bool
	intr     chan struct{}
	l        *fakeLauncher
}

func (l *fakeLauncher) Plan(t *Trial, _ []string) (int64, string, error) {
	if t.Values[3] == "sgd" {
		return 0, "does not fit (sgd, for the test)", nil
	}
	return 32, "", nil
}

func (l *fakeLauncher) Start(t *Trial, _ []string) (Proc, error) {
	l.mu.Lock()
	l.starts[t.ID]++
	l.mu.Unlock()
	return &fakeProc{t: t, from: len(t.Metrics), next: len(t.Metrics) + 1, epochs: l.epochs, score: objective(t.Values),
		answers: make(chan bool, 1), intr: make(chan struct{}, 1), l: l}, nil
}

func (p *fakeProc) Next() (Epoch, bool) {
	if p.awaiting {
		// As pipe run --sweep-gate does: no further epoch before the
		// answer to the last.
		select {
		case stop := <-p.answers:
			p.stopped = p.stopped || stop
		case <-p.intr:
			p.stopped = true
		}
		p.awaiting = false
	}
	if p.stopped || p.next > p.epochs {
		return Epoch{}, false
	}
	select {
	case <-p.intr:
		p.stopped = true
		return Epoch{}, false
	default:
	}
	e := p.next
	p.next++
	loss := p.score / float64(e)
	p.awaiting = e != p.epochs
	return Epoch{Epoch: e, Last: e == p.epochs, Loss: &loss}, true
}

func (p *fakeProc) Answer(stop bool) error {
	p.answers <- stop
	return nil
}

func (p *fakeProc) Interrupt() { p.intr <- struct{}{} }

func (p *fakeProc) Wait() (int, string) {
	p.l.mu.Lock()
	p.l.ended++
	if p.l.cancelAt > 0 && p.l.ended == p.l.cancelAt {
		p.l.cancel()
	}
	p.l.mu.Unlock()
	if p.stopped {
		return 130, ""
	}
	return 0, ""
}

func newController(l *fakeLauncher, st *State) *Controller {
	return &Controller{State: st, Params: testParams, Sampler: Random{}, Stopper: ASHA{Rung: 1, Eta: 3}, Launcher: l,
		Save: func(*State) error { return nil }, TrialDir: func(id int) string { return fmt.Sprint("trial-", id) }}
}

// TestControllerResumes: a sweep cancelled after a few trials ended and
// run again finishes every trial, launching only those left; trials not
// fitting are skipped without a launch, and ASHA stops some.
func TestControllerResumes(t *testing.T) {
	st := &State{Metric: "loss", Goal: "min", Trials: 16, Parallel: 2, Seed: 7, Params: ParamsOf(testParams)}
	ctx, cancel := context.WithCancel(context.Background())
	l := &fakeLauncher{epochs: 4, starts: map[int]int{}, cancelAt: 5, cancel: cancel}
	if err := newController(l, st).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Done {
		t.Fatal("done after a cancel")
	}
	finished := map[int]bool{}
	for _, tr := range st.Runs {
		finished[tr.ID] = tr.Finished()
	}
	l2 := &fakeLauncher{epochs: 4, starts: map[int]int{}}
	if err := newController(l2, st).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !st.Done || len(st.Runs) != 16 {
		t.Fatalf("done %v with %d trials", st.Done, len(st.Runs))
	}
	counts := map[string]int{}
	for _, tr := range st.Runs {
		counts[tr.Status]++
		if finished[tr.ID] && l2.starts[tr.ID] > 0 {
			t.Errorf("trial %d finished before and was launched again", tr.ID)
		}
		if tr.Status == Skipped && l.starts[tr.ID]+l2.starts[tr.ID] > 0 {
			t.Errorf("skipped trial %d was launched", tr.ID)
		}
	}
	if counts[Skipped] == 0 || counts[Stopped] == 0 || counts[Done] == 0 {
		t.Errorf("statuses %v: want some skipped, stopped and done", counts)
	}
	if b := st.BestTrial(); b == nil || b.Status != Done {
		t.Errorf("best %+v", b)
	}
}

// scriptProc is a trial process that reports the given metrics, one an
// epoch, answering the gate, and exits with code.
type scriptProc struct {
	metrics []float64
	code    int
	next    int
	answers chan bool
	stopped bool
}

func (p *scriptProc) Next() (Epoch, bool) {
	if p.next > 0 && p.next < len(p.metrics) {
		if stop := <-p.answers; stop {
			p.stopped = true
		}
	}
	if p.stopped || p.next >= len(p.metrics) {
		return Epoch{}, false
	}
	p.next++
	m := map[string]float64{}
	if v := p.metrics[p.next-1]; !math.IsNaN(v) {
		m["accuracy"] = v
	}
	return Epoch{Epoch: p.next, Last: p.next == len(p.metrics), Metrics: m}, true
}
func (p *scriptProc) Answer(stop bool) error { p.answers <- stop; return nil }
func (p *scriptProc) Interrupt()             {}
func (p *scriptProc) Wait() (int, string) {
	if p.stopped {
		return 130, ""
	}
	return p.code, "the last lines"
}

// scriptLauncher starts trial id as scripts[id].
type scriptLauncher map[int]*scriptProc

func (l scriptLauncher) Plan(*Trial, []string) (int64, string, error) { return 8, "", nil }
func (l scriptLauncher) Start(t *Trial, _ []string) (Proc, error) {
	p := l[t.ID]
	p.answers = make(chan bool, 1)
	return p, nil
}

// TestNaNMetricFailsTrial: a trial that measures no metric (absent, or
// NaN) at its last epoch ends failed with the reason, the others are
// ranked, and every state saved is JSON that loads back (NaN as null).
func TestNaNMetricFailsTrial(t *testing.T) {
	nan := math.NaN()
	path := t.TempDir() + "/sweep.json"
	st := &State{Metric: "accuracy", Goal: "max", Trials: 3, Parallel: 1, Epochs: 2, Params: ParamsOf(testParams[:1])}
	saves := 0
	c := &Controller{State: st, Params: testParams[:1], Sampler: Random{}, Stopper: NoStop{},
		Launcher: scriptLauncher{1: {metrics: []float64{0.5, 0.7}}, 2: {metrics: []float64{0.6, nan}}, 3: {metrics: []float64{nan, 0.4}}},
		Save: func(s *State) error {
			saves++
			return Save(path, s)
		}, TrialDir: func(id int) string { return fmt.Sprint("trial-", id) }}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*State{st, back} {
		got := ""
		for _, tr := range s.Runs {
			got += fmt.Sprintf("%d %s %v; ", tr.ID, tr.Status, tr.Metrics)
		}
		if want := "1 done [0.5 0.7]; 2 failed [0.6 NaN]; 3 done [NaN 0.4]; "; got != want || s.Best != 1 || !s.Done {
			t.Errorf("trials %s best %d done %v, want %s best 1", got, s.Best, s.Done, want)
		}
		if r := s.Runs[1].Reason; !strings.Contains(r, "no accuracy after epoch 2") {
			t.Errorf("reason %q", r)
		}
	}
	if saves < 6 {
		t.Errorf("%d saves", saves)
	}
}

// TestBestIsCompleted: a trial stopped early never ranks above a
// completed one, whatever its metric; the table lists completed trials,
// then stopped ones by the epoch they reached, then the rest.
func TestBestIsCompleted(t *testing.T) {
	st := &State{Metric: "accuracy", Goal: "max", Trials: 5, Params: ParamsOf(testParams[:1]), Runs: []*Trial{
		{ID: 1, Values: []string{"0.1"}, Status: Stopped, Reason: "asha", Metrics: []float64{0.9}},
		{ID: 2, Values: []string{"0.1"}, Status: Done, Metrics: []float64{0.5, 0.6, 0.77}},
		{ID: 3, Values: []string{"0.1"}, Status: Stopped, Reason: "asha", Metrics: []float64{0.4, 0.5}},
		{ID: 4, Values: []string{"0.1"}, Status: Interrupted, Metrics: []float64{0.95}},
		{ID: 5, Values: []string{"0.1"}, Status: Done, Metrics: []float64{0.2, 0.3, 0.8}},
	}}
	if b := st.BestTrial(); b == nil || b.ID != 5 {
		t.Fatalf("best %+v, want trial 5", b)
	}
	var order []int
	for _, tr := range st.Sorted() {
		order = append(order, tr.ID)
	}
	if fmt.Sprint(order) != "[5 2 3 1 4]" {
		t.Errorf("order %v, want [5 2 3 1 4]", order)
	}
	st.Runs = st.Runs[:1]
	if b := st.BestTrial(); b != nil {
		t.Errorf("best %+v with no completed trial", b)
	}
}

// TestTryLock: a second lock of a sweep's folder is refused, naming the
// holder's pid and host, until the first is released.
func TestTryLock(t *testing.T) {
	dir := t.TempDir()
	l, err := TryLock(dir, "f.pipe")
	if err != nil {
		t.Fatal(err)
	}
	_, err = TryLock(dir, "f.pipe")
	host, _ := os.Hostname()
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d, host %s", os.Getpid(), host)) {
		t.Fatalf("second lock: %v", err)
	}
	l.Release()
	l2, err := TryLock(dir, "f.pipe")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
}

// TestRunningFromBeforeIsInterrupted: a trial the state says is running
// when a sweep starts ran under a sweep that is gone (killed, or unable
// to save); interrupted before it is launched again, it is recorded
// interrupted, not left running (the property test found it).
func TestRunningFromBeforeIsInterrupted(t *testing.T) {
	st := &State{Metric: "accuracy", Goal: "max", Trials: 2, Parallel: 1, Params: ParamsOf(testParams[:1]),
		Runs: []*Trial{{ID: 1, Values: []string{"0.1"}, Status: Running, Metrics: []float64{0.5}, Launches: 1}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := &Controller{State: st, Params: testParams[:1], Sampler: Random{}, Stopper: NoStop{}, Launcher: scriptLauncher{},
		Save: func(*State) error { return nil }, TrialDir: func(id int) string { return fmt.Sprint("trial-", id) }}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if s := st.Runs[0].Status; s != Interrupted || st.Done {
		t.Errorf("status %s, done %v", s, st.Done)
	}
}
