// Package sweep runs a hyperparameter search over a pipe file: trials are
// the file with one --set per parameter, chosen by a sampler (random or
// TPE), planned before they start, run as processes of their own a few at
// a time, and stopped early at epoch boundaries (ASHA or the median rule).
// Its state is a JSON file written after every event, so that a sweep
// stopped and started again goes on where it stopped. What a trial is
// and how it runs is the Launcher's (cmd/pipe); this package decides.
// docs/design/sweeps.md says why it is built so.
package sweep

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"pipe/lang"
)

// Trial statuses. A pending, running or interrupted trial is unfinished:
// a sweep started again runs it (from its checkpoint when it has one).
const (
	Pending     = "pending"
	Running     = "running"
	Interrupted = "interrupted"
	Done        = "done"
	Stopped     = "stopped" // stopped early by ASHA or the median rule
	Skipped     = "skipped" // planned, did not fit: never launched
	Failed      = "failed"
)

// A Trial is one configuration of the sweep and what became of it.
type Trial struct {
	ID int `json:"id"`
	// Values are the parameters' values, in the sweep's order, as the
	// file would write them.
	Values []string `json:"values"`
	Status string   `json:"status"`
	// Reason says why a trial was skipped, stopped or failed.
	Reason string `json:"reason,omitempty"`
	// Batch is the batch its plan gave it (batch auto: what fits).
	Batch int64  `json:"batch,omitempty"`
	Dir   string `json:"dir"`
	// Metrics holds the sweep's metric after each epoch trained.
	Metrics []float64 `json:"metrics"`
	// Launches counts the processes started for it (a resumed trial
	// has two).
	Launches int     `json:"launches"`
	Seconds  float64 `json:"seconds"`
}

// Finished says the trial will not run again.
func (t *Trial) Finished() bool {
	switch t.Status {
	case Done, Stopped, Skipped, Failed:
		return true
	}
	return false
}

// Last is the trial's metric after its last epoch; ok false before one.
func (t *Trial) Last() (float64, bool) {
	if len(t.Metrics) == 0 {
		return math.NaN(), false
	}
	return t.Metrics[len(t.Metrics)-1], true
}

// Param is a parameter as the state records it.
type Param struct {
	Path    string   `json:"path"`
	Kind    string   `json:"kind"`
	Low     float64  `json:"low,omitempty"`
	High    float64  `json:"high,omitempty"`
	Log     bool     `json:"log,omitempty"`
	Choices []string `json:"choices,omitempty"`
}

// ParamsOf records params.
func ParamsOf(params []lang.SweepParam) []Param {
	out := make([]Param, len(params))
	for i, p := range params {
		out[i] = Param{Path: p.Path, Kind: p.Kind, Low: p.Low, High: p.High, Log: p.Log, Choices: p.Choices}
	}
	return out
}

// State is the sweep as sweep.json holds it.
type State struct {
	Version  int    `json:"version"`
	File     string `json:"file"`
	Pipeline string `json:"pipeline"`
	// SourceSHA256 is the hash of the file as swept (its own --set
	// applied): a sweep continues only over the same text.
	SourceSHA256 string   `json:"source_sha256"`
	Sets         []string `json:"sets,omitempty"`
	Metric       string   `json:"metric"`
	Goal         string   `json:"goal"`
	Sampler      string   `json:"sampler"`
	EarlyStop    string   `json:"early_stop"`
	Trials       int      `json:"trials"`
	Parallel     int      `json:"parallel"`
	// Threads is each trial's compute threads.
	Threads int      `json:"threads_per_trial"`
	Epochs  int      `json:"epochs"`
	Seed    uint64   `json:"seed"`
	Params  []Param  `json:"params"`
	Started string   `json:"started"`
	Updated string   `json:"updated"`
	Done    bool     `json:"done"`
	Runs    []*Trial `json:"trial_runs"`
	// Best is the ID of the best finished trial, 0 when none.
	Best int `json:"best,omitempty"`
}

// Maximize says whether the metric is maximised.
func (s *State) Maximize() bool { return s.Goal == "max" }

// Score is a metric value as samplers and stoppers compare them: lower
// is better; NaN is worst.
func (s *State) Score(v float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(1)
	}
	if s.Maximize() {
		return -v
	}
	return v
}

// Overrides are trial t's --set flags, PATH=VALUE.
func (s *State) Overrides(t *Trial) []string {
	out := make([]string, len(s.Params))
	for i, p := range s.Params {
		out[i] = p.Path + "=" + t.Values[i]
	}
	return out
}

// BestTrial is the completed (done) trial with the best last metric,
// nil when none has one. A trial stopped early never ranks: its metric
// is from fewer epochs than the others' (and, under a schedule such as
// cosine, from another point of it), and the rule stopped it because it
// was behind at its rung; best.pipe trains the whole run, which only a
// completed trial has shown (docs/design/sweeps.md).
func (s *State) BestTrial() *Trial {
	var best *Trial
	for _, t := range s.Runs {
		v, ok := t.Last()
		if !ok || math.IsNaN(v) || t.Status != Done {
			continue
		}
		if best == nil {
			best = t
			continue
		}
		if bv, _ := best.Last(); s.Score(v) < s.Score(bv) {
			best = t
		}
	}
	return best
}

// Epoch is what a trial reports at an epoch's end: its validation loss
// and metrics, and whether it is the run's last (no answer is awaited).
type Epoch struct {
	Epoch   int                `json:"epoch"`
	Step    int64              `json:"step"`
	Last    bool               `json:"last"`
	Loss    *float64           `json:"val_loss"`
	Metrics map[string]float64 `json:"metrics"`
}

// Launcher plans and starts trials.
type Launcher interface {
	// Plan plans trial t with its overrides: the batch it gets, or why
	// it cannot run (reason not empty: it is skipped).
	Plan(t *Trial, overrides []string) (batch int64, reason string, err error)
	// Start starts t's process in t.Dir, continuing from its checkpoint
	// when the folder holds one.
	Start(t *Trial, overrides []string) (Proc, error)
}

// Proc is a trial's running process.
type Proc interface {
	// Next blocks for the next epoch's report; false once the process's
	// output has ended.
	Next() (Epoch, bool)
	// Answer tells the process, waiting at an epoch's end, to go on or
	// to stop (write its checkpoint and exit).
	Answer(stop bool) error
	// Interrupt asks the process to stop at its next step (SIGINT).
	Interrupt()
	// Wait waits for its end: the exit code, and the last lines it
	// wrote for a failure's reason.
	Wait() (code int, tail string)
}

// Controller runs a sweep's trials.
type Controller struct {
	State    *State
	Params   []lang.SweepParam
	Sampler  Sampler
	Stopper  Stopper
	Launcher Launcher
	// Save writes the state; called after every event.
	Save func(*State) error
	// Log gets a line per event.
	Log io.Writer
	// TrialDir names trial id's folder.
	TrialDir func(id int) string
}

type event struct {
	t     *Trial
	p     Proc
	epoch *Epoch
	exit  bool
	code  int
	tail  string
}

// Run runs the trials left: the unfinished ones of State first, then new
// ones until State.Trials exist, State.Parallel at a time. A cancelled
// ctx interrupts the running trials (they write a checkpoint), starts no
// more and returns once they have ended, with the state saved. An error
// of the sweep's own (the state cannot be saved, a trial cannot be
// planned) does the same and is returned: the trials running are never
// left behind.
func (c *Controller) Run(ctx context.Context) error {
	s := c.State
	events := make(chan event)
	running := map[int]Proc{}
	stopWhy := map[int]string{}
	began := map[int]time.Time{}
	interrupting := false
	var failure error
	var todo []*Trial
	for _, t := range s.Runs {
		if t.Status == Running {
			// Its sweep ended without seeing it end (killed, or its state
			// could not be saved): it runs again, as an interrupted one.
			t.Status = Interrupted
		}
		if !t.Finished() {
			todo = append(todo, t)
		}
	}
	stopAll := func(why string) {
		if interrupting {
			return
		}
		interrupting = true
		if len(running) > 0 {
			c.logf("%s: stopping %d running trial(s) at their next step; run pipe sweep again to continue", why, len(running))
		}
		for _, p := range running {
			p.Interrupt()
		}
	}
	// save keeps the first error and stops the sweep on it.
	save := func() {
		s.Updated = time.Now().Format(time.RFC3339)
		s.Best = 0
		if b := s.BestTrial(); b != nil {
			s.Best = b.ID
		}
		if err := c.Save(s); err != nil && failure == nil {
			failure = fmt.Errorf("saving the sweep's state: %w", err)
			stopAll("cannot save the sweep's state")
		}
	}
	next := func() *Trial {
		if len(todo) > 0 {
			t := todo[0]
			todo = todo[1:]
			return t
		}
		if len(s.Runs) >= s.Trials {
			return nil
		}
		id := len(s.Runs) + 1
		rng := TrialRand(s.Seed, id)
		t := &Trial{ID: id, Values: c.Sampler.Suggest(c.Params, c.history(), rng), Status: Pending, Dir: c.TrialDir(id), Metrics: []float64{}}
		s.Runs = append(s.Runs, t)
		return t
	}
	for {
		for !interrupting && len(running) < max(s.Parallel, 1) && ctx.Err() == nil {
			t := next()
			if t == nil {
				break
			}
			c.launch(t, running, began, events, save, func(err error) {
				failure = fmt.Errorf("trial %d: %w", t.ID, err)
				stopAll("the sweep cannot go on")
			})
		}
		if len(running) == 0 {
			break
		}
		var ev event
		select {
		case ev = <-events:
		case <-ctx.Done():
			stopAll("sweep interrupted")
			ev = <-events
		}
		t := ev.t
		if ev.epoch != nil {
			c.record(t, ev.epoch)
			stop, why := false, ""
			if !ev.epoch.Last {
				if interrupting {
					stop = true
				} else if v, ok := t.Last(); ok && ev.epoch.Epoch == len(t.Metrics) {
					stop, why = c.Stopper.Stop(t.ID, ev.epoch.Epoch, s.Score(v), c.seen())
				}
				if stop && why != "" {
					stopWhy[t.ID] = why
				}
				_ = ev.p.Answer(stop)
			}
			save()
			continue
		}
		delete(running, t.ID)
		t.Seconds += time.Since(began[t.ID]).Seconds()
		c.ended(t, ev.code, ev.tail, stopWhy[t.ID], interrupting)
		save()
	}
	s.Done = failure == nil
	for _, t := range s.Runs {
		s.Done = s.Done && t.Finished()
	}
	s.Done = s.Done && len(s.Runs) >= s.Trials
	save()
	return failure
}

// launch plans trial t and starts it, or records why it was not: skipped
// by its plan, failed to start. fail gets an error of the sweep's own.
func (c *Controller) launch(t *Trial, running map[int]Proc, began map[int]time.Time, events chan<- event, save func(), fail func(error)) {
	ov := c.State.Overrides(t)
	batch, reason, err := c.Launcher.Plan(t, ov)
	if err != nil {
		fail(err)
		return
	}
	if reason != "" {
		t.Status, t.Reason = Skipped, reason
		c.logf("trial %d %s: skipped, not launched: %s", t.ID, c.values(t), reason)
		save()
		return
	}
	t.Batch = batch
	p, err := c.Launcher.Start(t, ov)
	if err != nil {
		t.Status, t.Reason = Failed, err.Error()
		c.logf("trial %d: %v", t.ID, err)
		save()
		return
	}
	t.Status, t.Launches = Running, t.Launches+1
	began[t.ID] = time.Now()
	from := ""
	if len(t.Metrics) > 0 {
		from = fmt.Sprintf(", continuing after epoch %d", len(t.Metrics))
	}
	c.logf("trial %d %s: started, batch %d%s", t.ID, c.values(t), batch, from)
	running[t.ID] = p
	save()
	go func() {
		for {
			ep, ok := p.Next()
			if !ok {
				break
			}
			events <- event{t: t, p: p, epoch: &ep}
		}
		code, tail := p.Wait()
		events <- event{t: t, p: p, exit: true, code: code, tail: tail}
	}()
}

// ended records how trial t's process ended: its exit code, the last
// lines it wrote, why the stopper stopped it ("" when it did not), and
// whether the sweep was stopping it. A trial that ends with no metric
// after its last epoch (the run measured nothing, or NaN) has failed:
// there is nothing to rank it by.
func (c *Controller) ended(t *Trial, code int, tail, stopWhy string, interrupting bool) {
	s := c.State
	switch {
	case code == 0:
		t.Status, t.Reason = Done, ""
	case stopWhy != "":
		t.Status, t.Reason = Stopped, stopWhy
	case interrupting && code == 130:
		t.Status, t.Reason = Interrupted, ""
	case code == 3:
		t.Status, t.Reason = Skipped, "does not fit when run: "+tail
	default:
		t.Status, t.Reason = Failed, fmt.Sprintf("exit %d: %s", code, tail)
	}
	v, ok := t.Last()
	if (t.Status == Done || t.Status == Stopped) && (!ok || math.IsNaN(v)) {
		t.Status = Failed
		t.Reason = fmt.Sprintf("no %s after epoch %d: the run measured none, or not a number (see its trial.log)", s.Metric, len(t.Metrics))
		if !ok {
			t.Reason = fmt.Sprintf("no %s: the run reported no epoch (see its trial.log)", s.Metric)
		}
	}
	c.logf("trial %d: %s after %d epoch(s), %s %s%s", t.ID, t.Status, len(t.Metrics), s.Metric, fmtMetric(v), reasonText(t.Reason))
}

func reasonText(r string) string {
	if r == "" {
		return ""
	}
	return " (" + r + ")"
}

func fmtMetric(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.4g", v)
}

func (c *Controller) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "pipe sweep: "+format+"\n", args...)
	}
}

// values names t's values shortly: [lr=0.001 p=0.2].
func (c *Controller) values(t *Trial) string {
	parts := make([]string, len(t.Values))
	for i, v := range t.Values {
		parts[i] = ShortName(c.State.Params, i) + "=" + v
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// record keeps epoch e's metric, replacing what a resumed trial reports
// again.
func (c *Controller) record(t *Trial, e *Epoch) {
	v := math.NaN()
	if c.State.Metric == "loss" {
		if e.Loss != nil {
			v = *e.Loss
		}
	} else if m, ok := e.Metrics[c.State.Metric]; ok {
		v = m
	}
	if e.Epoch < 1 {
		return
	}
	if len(t.Metrics) >= e.Epoch {
		t.Metrics = t.Metrics[:e.Epoch-1]
	}
	for len(t.Metrics) < e.Epoch-1 {
		t.Metrics = append(t.Metrics, math.NaN()) // epochs before this process's reports
	}
	t.Metrics = append(t.Metrics, v)
}

// history is the finished trials as the sampler sees them.
func (c *Controller) history() []Observation {
	var out []Observation
	for _, t := range c.State.Runs {
		switch t.Status {
		case Done, Stopped:
			v, _ := t.Last()
			out = append(out, Observation{Values: t.Values, Score: c.State.Score(v)})
		case Skipped, Failed:
			out = append(out, Observation{Values: t.Values, Score: math.Inf(1)})
		}
	}
	return out
}

// seen is every trial's scores by epoch, for the stopper.
func (c *Controller) seen() map[int][]float64 {
	out := map[int][]float64{}
	for _, t := range c.State.Runs {
		if len(t.Metrics) == 0 {
			continue
		}
		sc := make([]float64, len(t.Metrics))
		for i, v := range t.Metrics {
			sc[i] = c.State.Score(v)
		}
		out[t.ID] = sc
	}
	return out
}

// TrialRand is trial id's random source: ChaCha8 keyed by a hash of the
// sweep's seed and the id, so that a trial's random values do not
// depend on the trials before it, and neighbouring ids share nothing
// (PCG streams seeded 1, 2, 3 start alike).
func TrialRand(seed uint64, id int) *rand.Rand {
	var key [32]byte
	sum := sha256.Sum256([]byte(fmt.Sprintf("pipe sweep %d trial %d", seed, id)))
	copy(key[:], sum[:])
	return rand.New(rand.NewChaCha8(key))
}

// ShortName is parameter i's name in tables: its path's last segment,
// with the one before it when another parameter ends the same way.
func ShortName(params []Param, i int) string {
	last := func(p string, n int) string {
		seg := strings.Split(p, ".")
		return strings.Join(seg[max(0, len(seg)-n):], ".")
	}
	name := last(params[i].Path, 1)
	for j := range params {
		if j != i && last(params[j].Path, 1) == name {
			return last(params[i].Path, 2)
		}
	}
	return name
}

// Sorted returns the trials best first: the completed ones with a
// metric by score, then those stopped early, the later the stop the
// higher and by score at it, then the rest by ID.
func (s *State) Sorted() []*Trial {
	out := append([]*Trial(nil), s.Runs...)
	// rank: 0 completed, 1 stopped, 2 the rest.
	key := func(t *Trial) (rank int, epochs int, score float64) {
		v, ok := t.Last()
		switch {
		case !ok || math.IsNaN(v):
			return 2, 0, 0
		case t.Status == Done:
			return 0, 0, s.Score(v)
		case t.Status == Stopped:
			return 1, -len(t.Metrics), s.Score(v)
		}
		return 2, 0, 0
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, ei, si := key(out[i])
		rj, ej, sj := key(out[j])
		switch {
		case ri != rj:
			return ri < rj
		case ei != ej:
			return ei < ej
		case si != sj:
			return si < sj
		}
		return out[i].ID < out[j].ID
	})
	return out
}
