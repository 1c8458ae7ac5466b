package planner

import (
	"fmt"
	"strings"

	"pipe/diag"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// The batch and the checkpoint plan are solved together: every term of the
// memory model but the parameters, gradients and optimizer state grows
// linearly with the batch, so a plan's activation peak per sample fixes the
// largest batch, and a candidate batch fixes the budget the checkpoint
// solver plans under. An explicit batch is checked; an auto micro-batch is
// the largest divisor of effective_batch that fits, with checkpointing only
// when none fits without it (accumulation costs no FLOPs, recomputation
// does); any other auto batch is the largest that fits, rounded down to a
// multiple of 8 on a GPU, within the user's auto(min A max B) bounds.
//
// Derivation: docs/design/checkpoint-solver.md (the last section).

// cpuMinBatch is the least batch an auto batch on the CPU is lowered to
// (cpuSaturation) when auto(min N) does not say: batchnorm's batch
// statistics degrade below 16 to 32 samples (Wu and He, "Group
// Normalization", 2018, figure 1), and 32 is the common default.
const cpuMinBatch = 32

// cpuSaturation lowers an auto batch top on the CPU to the least batch,
// from floor up by doubling, whose estimated samples a second (the
// roofline, stepTime) are within 10% of top's: on the CPU a batch past
// that buys little speed, and costs optimizer updates an epoch. It
// returns top when the estimate says nothing, with the reason to add.
func (pl *planner) cpuSaturation(prec plan.Precision, floor, top int64) (int64, string) {
	sps := func(b int64) float64 {
		return stepTime(pl.graph, pl.cost, pl.dev, prec, b, 1, nil, pl.group, pl.fused, nil).SamplesPerSecond
	}
	best := sps(top)
	if best <= 0 || floor < 1 {
		return top, ""
	}
	for c := floor; c < top; c *= 2 {
		if v := sps(c); v >= 0.9*best {
			return c, fmt.Sprintf("; then lowered to %d: on the CPU the step-time estimate reaches %.0f samples/s at %d against %.0f at %d, within 10%%, "+
				"and a larger batch would buy little speed for fewer optimizer updates an epoch (the least batch tried is %d)", c, v, c, best, top, floor)
		}
	}
	return top, ""
}

// defaultMaxBatch bounds an auto batch with neither a max nor an
// effective_batch, so a tiny model does not get a batch of millions.
const defaultMaxBatch = 4096

// MinStepsPerEpoch is the fewest optimizer steps an epoch that an auto
// batch leaves when the training set's size is known: a batch as large as
// the data is one step an epoch, which trains little however much memory
// allows it.
const MinStepsPerEpoch = 32

type batchSpec struct {
	explicit  int64 // 0 for auto
	fileBatch int64 // the file's explicit batch, 0 when auto or absent
	min, max  int64 // auto bounds, 0 when absent
	effective int64 // effective_batch, 0 when absent
	at        *diag.Range
	effAt     *diag.Range
	fromFlag  bool
	fileText  string // the file's batch as written ("64", "auto"), "" when absent
}

// name is how a diagnostic names batch b: "batch 64", or "--batch 64"
// when WithBatch gave it, so that it is not taken for the file's.
func (s batchSpec) name(b int64) string {
	if s.fromFlag {
		return fmt.Sprintf("--batch %d", b)
	}
	return fmt.Sprintf("batch %d", b)
}

// subject is where a diagnostic about the batch points: the file's batch
// line, or nowhere when --batch overrides it (a caret under "batch 64"
// would blame a line that played no part).
func (s batchSpec) subject() *diag.Range {
	if s.fromFlag {
		return nil
	}
	return s.at
}

// lower says how to ask for batch n or less, where the batch was given.
func (s batchSpec) lower(n int64) string {
	if s.fromFlag {
		return fmt.Sprintf("Give --batch %d or less, or leave --batch out.%s", n, s.flagNote())
	}
	return fmt.Sprintf("Write batch %d or less, or batch auto.", n)
}

// flagNote says, for a batch from --batch, that the file's is overridden.
func (s batchSpec) flagNote() string {
	if !s.fromFlag || s.fileText == "" {
		return ""
	}
	return fmt.Sprintf(" The batch comes from --batch, which overrides the file's batch %s.", s.fileText)
}

type batchChoice struct {
	batch, accum int64
	fileBatch    int64
	mode         string
	ck           ckptResult
}

func (pl *planner) batchSpec() batchSpec {
	var s batchSpec
	s.at = pl.train.At.Written("batch")
	if v := pl.train.Batch; v != nil {
		s.fileText = "auto"
		if !v.IsAuto {
			s.fileText = fmt.Sprint(v.Value)
		}
		if v.IsAuto {
			if v.Min != nil {
				s.min = int64(*v.Min)
			}
			if v.Max != nil {
				s.max = int64(*v.Max)
			}
		} else {
			s.explicit, s.fileBatch = v.Value, v.Value
		}
	}
	s.effAt = pl.train.At.Written("effective_batch")
	s.effective = pl.train.EffectiveBatch
	// With data parallelism the batch is per device, and effective_batch
	// is what all the devices' micro-batches make together.
	if w := int64(pl.plan.WorldSize()); w > 1 && s.effective > 0 {
		if s.effective%w != 0 {
			pl.errorf(s.effAt, "effective-not-world", fmt.Sprintf("effective_batch %d does not split over %d devices", s.effective, w),
				"With data parallelism each optimizer update takes the same number of samples from every device: make effective_batch a multiple of %d.", w)
		}
		s.effective /= w
	}
	if pl.cfg.batch > 0 {
		s.explicit, s.fromFlag, s.min, s.max = pl.cfg.batch, true, 0, 0
	}
	if s.at == nil && pl.sp.Train != nil {
		r := pl.train.At.KindRange
		s.at = &r
	}
	return s
}

func (pl *planner) checkpointMode() (string, *diag.Range) {
	at := pl.train.At.Written("checkpoint")
	if v, ok := pl.train.Checkpoint.Fixed(); ok {
		return v, at
	}
	return "auto", at
}

// chooseBatch decides the batch, the accumulation and the checkpoint plan.
// extra is per-sample memory beyond the model's (the CPU's loader buffers).
func (pl *planner) chooseBatch(budget, extra int64, prec plan.Precision) batchChoice {
	bs := pl.batchBounds(budget, extra)
	bs.checkEffective()
	if bs.s.explicit > 0 {
		return bs.explicit()
	}
	lo := max(bs.s.min, 1)
	fitMax := bs.bCk
	if bs.mode == "none" {
		fitMax = bs.bNo
	}
	var b int64
	var why string
	if bs.s.effective > 0 {
		b, why = bs.divisorBatch(lo, fitMax)
	} else {
		b, why = bs.largestBatch(lo, fitMax, prec)
	}
	return bs.auto(lo, b, why)
}

// batchSearch is chooseBatch's work in phases: the batch as written
// (s), the checkpoint mode, the largest batch that fits without
// checkpointing (bNo) and with the plan of least peak (bCk), and the
// training set, for the messages.
type batchSearch struct {
	pl            *planner
	m             *costModel
	s             batchSpec
	mode          string
	budget, extra int64
	// base is the activation peak a sample without checkpointing, minPk
	// with the plan of least peak (base when mode is none).
	base, minPk int64
	bNo, bCk    int64
	// n is the training samples (0 when unknown), world the devices;
	// about says how n is known and src of which source.
	n, world   int64
	about, src string
}

// batchBounds finds the largest batches that fit, with and without
// checkpointing.
func (pl *planner) batchBounds(budget, extra int64) *batchSearch {
	m := pl.cost
	s := pl.batchSpec()
	if m.gpu != nil {
		m.gpu.effective = s.effective
	}
	mode, _ := pl.checkpointMode()
	bs := &batchSearch{pl: pl, m: m, s: s, mode: mode, budget: budget, extra: extra, base: m.baseline, minPk: m.baseline}
	if mode != "none" {
		_, bs.minPk, _ = m.minPlan()
	}
	bs.bNo = m.maxBatch(budget, bs.base, extra)
	bs.bCk = m.maxBatch(budget, bs.minPk, extra)
	if mode == "all" {
		bs.bNo = bs.bCk
	}
	if m.cpu != nil && mode == "auto" && bs.bCk >= bs.bNo {
		// On the CPU the plan of least kept memory need not have the
		// least peak, so a larger batch may fit with another plan.
		limit := int64(defaultMaxBatch)
		if s.max > 0 {
			limit = s.max
		}
		if s.effective > 0 {
			limit = min(limit, s.effective)
		}
		if s.explicit > 0 {
			limit = 0
		}
		bs.bCk = largestFitting(bs.bCk, limit, func(b int64) bool { _, ok := bs.fit(b); return ok })
	}
	bs.n, bs.world = pl.cfg.samples, int64(pl.plan.WorldSize())
	bs.about = "has"
	if !pl.cfg.samplesExact {
		bs.about = "has at most"
	}
	bs.src = "the training source"
	if b := pl.source(); b != nil {
		bs.src = "source " + b.Name
	}
	return bs
}

// fit returns the cheapest checkpoint plan at batch b, and whether b fits.
func (bs *batchSearch) fit(b int64) (ckptResult, bool) {
	m, budget, extra, base := bs.m, bs.budget, bs.extra, bs.base
	bs.pl.poll()
	if bs.mode == "all" {
		r, _, ok := m.minPlan()
		return r, ok && m.total(b, r.Peak, extra) <= budget
	}
	if m.total(b, base, extra) <= budget {
		return ckptResult{Peak: base, Exact: true}, true
	}
	if bs.mode == "none" {
		return ckptResult{Peak: base, Exact: true}, false
	}
	r, ok := m.solve(m.actBudget(budget, b, extra))
	if ok && m.gpu != nil && m.total(b, r.Peak, extra) > budget {
		// The GPU's activation budget is a bound (memory_gpu.go);
		// where its plan does not fit after all, the plan of least
		// peak may.
		ok = false
	}
	if !ok && m.gpu != nil {
		if r, _, okMin := m.minPlan(); okMin && m.total(b, r.Peak, extra) <= budget {
			return r, true
		}
	}
	if !ok {
		return ckptResult{Peak: base, Exact: true}, false
	}
	return r, true
}

// noFit explains that batch b does not fit.
func (bs *batchSearch) noFit(b int64) {
	bs.pl.noFit(bs.s, b, bs.bNo, bs.bCk, bs.base, bs.minPk, bs.extra, bs.budget, bs.mode)
}

// checkEffective refuses an effective_batch larger than the training set.
func (bs *batchSearch) checkEffective() {
	E, n, world := bs.s.effective, bs.n, bs.world
	if n > 0 && E > 0 && E*world > n {
		bs.pl.errorf(bs.s.effAt, "effective-exceeds-data", fmt.Sprintf("effective_batch %d is larger than the training set (%d samples)", E*world, n),
			"%s %s %d training samples (after its split): an optimizer step could never take %d of them, and the learning rate would be scaled for a batch that is never formed. Lower effective_batch to %d or less.",
			bs.src, bs.about, n, E*world, n)
	}
}

// explicit takes the batch as written (or --batch), saying whether it
// fits.
func (bs *batchSearch) explicit() batchChoice {
	pl, s, n, world := bs.pl, bs.s, bs.n, bs.world
	out := batchChoice{mode: bs.mode, fileBatch: s.fileBatch, accum: 1}
	b := s.explicit
	if n > 0 && b*world > n {
		what := s.name(b)
		if world > 1 {
			what = fmt.Sprintf("%s on %d devices (%d a step)", s.name(b), world, b*world)
		}
		pl.errorf(s.subject(), "batch-exceeds-data", fmt.Sprintf("%s is larger than the training set (%d samples)", what, n),
			"%s %s %d training samples (after its split): every step would see those %d, and the learning rate would be scaled for %d that are never formed. %s",
			bs.src, bs.about, n, n, b*world, s.lower(max(n/world, 1)))
	}
	out.batch = b
	if a := pl.staticBatch(s); a > 0 {
		out.accum = a
	}
	r, ok := bs.fit(b)
	out.ck = r
	how := "as written"
	if s.fromFlag {
		how = "from --batch"
	}
	if !ok {
		bs.noFit(b)
		pl.decide("batch", fmt.Sprint(b), fmt.Sprintf("%d %s; it does not fit: %s.", b, how, pl.fitSummary(bs.bNo, bs.bCk, bs.mode)))
	} else {
		pl.decide("batch", fmt.Sprint(b), fmt.Sprintf("%d %s; it fits (%s).", b, how, pl.fitSummary(bs.bNo, bs.bCk, bs.mode)))
	}
	pl.checkpointDecision(bs.mode, b, r, bs.base, ok)
	pl.accumDecision(s.effective, b, out.accum, false)
	return out
}

// divisorBatch is auto's batch under an effective_batch: its largest
// divisor from lo that fits, without checkpointing when one does; 0
// when none fits.
func (bs *batchSearch) divisorBatch(lo, fitMax int64) (int64, string) {
	pl, s, E, mode := bs.pl, bs.s, bs.s.effective, bs.mode
	pl.staticBatch(s)
	capBy := func(limit int64) int64 {
		if s.max > 0 {
			limit = min(limit, s.max)
		}
		return largestDivisor(E, lo, limit)
	}
	if d := capBy(bs.bNo); d > 0 && mode != "all" {
		return d, pl.divisorReason(E, d, bs.bNo, s.max, "")
	}
	if d := capBy(bs.bCk); d > 0 && mode != "none" {
		why := pl.divisorReason(E, d, bs.bCk, s.max, " with checkpointing")
		if bs.bNo >= lo && mode == "auto" {
			why = strings.TrimSuffix(why, ".") + fmt.Sprintf("; no divisor of %d from %d up fits without checkpointing.", E, lo)
		}
		return d, why
	}
	if fitMax >= lo {
		pl.errorf(s.effAt, "no-divisor-fits", fmt.Sprintf("no micro-batch between %d and %d divides effective_batch %d", lo, fitMax, E),
			"The largest batch that fits is %d; effective_batch needs a micro-batch dividing it (%s). Pick an effective_batch with a divisor in that range.",
			fitMax, divisorList(E))
		return fitMax, ""
	}
	return 0, ""
}

// largestBatch is auto's batch without an effective_batch: the largest
// that fits, within auto(max N) or pipe's bound and the training set's
// steps, no larger than the CPU saturates at, and a multiple of 8 for
// tensor cores.
func (bs *batchSearch) largestBatch(lo, fitMax int64, prec plan.Precision) (int64, string) {
	pl, s, n, world := bs.pl, bs.s, bs.n, bs.world
	b := fitMax
	limit := "memory"
	switch {
	case s.max > 0 && s.max < b:
		b, limit = s.max, fmt.Sprintf("the auto(max %d) bound", s.max)
	case s.max == 0 && b > defaultMaxBatch:
		b, limit = defaultMaxBatch, fmt.Sprintf("pipe's default bound of %d (write auto(max N) to go higher)", defaultMaxBatch)
	}
	if n > 0 {
		if dc := max(n/(MinStepsPerEpoch*world), 1); dc < b {
			b = max(dc, lo)
			limit = fmt.Sprintf("the training set: %s %s %d samples, and a batch of at most %d leaves %d or more optimizer steps an epoch", bs.src, bs.about, n, dc, MinStepsPerEpoch)
			if world > 1 {
				limit += fmt.Sprintf(" over %d devices", world)
			}
		}
	}
	why := fmt.Sprintf("the largest batch that fits is %d; the batch is limited by %s", fitMax, limit)
	if fitMax > bs.bNo && b > bs.bNo {
		why = fmt.Sprintf("the largest batch that fits is %d without checkpointing and %d with it; the batch is limited by %s", bs.bNo, fitMax, limit)
	}
	if pl.dev.Kind == plan.BackendCPU && !pl.cfg.largest {
		floor := int64(cpuMinBatch)
		if s.min > 0 {
			floor = s.min
		}
		if c, note := pl.cpuSaturation(prec, floor, b); c < b {
			why += note
			b = c
		}
	}
	tensor := pl.dev.Kind == plan.BackendGPU && prec.Compute != "fp32"
	if tensor && b >= 8 && b%8 != 0 && b/8*8 >= lo {
		why += fmt.Sprintf(", then rounded down from %d to a multiple of 8 for tensor cores", b)
		b = b / 8 * 8
	}
	return b, why + "."
}

// auto decides the automatic batch b (why: the reason), or, when it is
// below lo, says that nothing fits.
func (bs *batchSearch) auto(lo, b int64, why string) batchChoice {
	pl, E := bs.pl, bs.s.effective
	out := batchChoice{mode: bs.mode, fileBatch: bs.s.fileBatch, accum: 1}
	if b < lo || b < 1 {
		out.batch = max(lo, 1)
		r, _ := bs.fit(out.batch)
		out.ck = r
		bs.noFit(out.batch)
		pl.decide("batch", fmt.Sprint(out.batch), fmt.Sprintf("auto: nothing between %d and the bounds fits: %s.", lo, pl.fitSummary(bs.bNo, bs.bCk, bs.mode)))
		pl.checkpointDecision(bs.mode, out.batch, r, bs.base, false)
		return out
	}
	out.batch = b
	if E > 0 {
		out.accum = E / b
	}
	r, ok := bs.fit(b)
	if !ok {
		// Cannot happen when maxBatch and solve agree; keep the numbers honest.
		bs.noFit(b)
	}
	out.ck = r
	pl.decide("batch", fmt.Sprint(b), "auto: "+why)
	pl.checkpointDecision(bs.mode, b, r, bs.base, ok)
	pl.accumDecision(E, b, out.accum, true)
	return out
}

func (pl *planner) divisorReason(E, d, fit, max int64, how string) string {
	bound := fit
	lim := fmt.Sprintf("the largest batch that fits%s is %d", how, fit)
	if max > 0 && max < fit {
		bound = max
		lim += fmt.Sprintf(" and auto(max %d) bounds it", max)
	}
	switch {
	case d == E:
		return lim + fmt.Sprintf(", so the whole effective_batch %d runs at once.", E)
	case d == bound:
		return lim + fmt.Sprintf(", and %d divides effective_batch %d.", d, E)
	}
	return lim + fmt.Sprintf("; %d does not divide effective_batch %d, so the micro-batch is %d, its largest divisor below that, and accumulation reaches %d exactly.", bound, E, d, E)
}

// largestFitting returns the largest batch from b up to limit for which
// fits holds, galloping up from b and then bisecting; b when b+1 does
// not fit or b is at the limit.
func largestFitting(b, limit int64, fits func(int64) bool) int64 {
	if b >= limit || !fits(b+1) {
		return b
	}
	lo, step := b+1, int64(1)
	hi := limit + 1 // the first batch known not to fit, or beyond the limit
	for {
		next := lo + 2*step
		if next >= hi {
			break
		}
		if !fits(next) {
			hi = next
			break
		}
		lo, step = next, 2*step
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// divisors returns the divisors of n in increasing order. Trial division
// stops at 2·10^6, so an absurd n (beyond 4·10^12) lists only the
// divisors it reached and their cofactors.
func divisors(n int64) []int64 {
	var lo, hi []int64
	for d := int64(1); d*d <= n && d <= 2e6; d++ {
		if n%d == 0 {
			lo = append(lo, d)
			if d*d != n {
				hi = append(hi, n/d)
			}
		}
	}
	for i := len(hi) - 1; i >= 0; i-- {
		lo = append(lo, hi[i])
	}
	return lo
}

// largestDivisor returns the largest divisor of n in [lo, hi], or 0.
func largestDivisor(n, lo, hi int64) int64 {
	ds := divisors(n)
	for i := len(ds) - 1; i >= 0; i-- {
		if d := ds[i]; d <= hi && d >= lo {
			return d
		}
	}
	return 0
}

func divisorList(n int64) string {
	var out []string
	ds := divisors(n)
	for i, d := range ds {
		if i == 10 && i < len(ds)-1 {
			out = append(out, "…", fmt.Sprint(ds[len(ds)-1]))
			break
		}
		out = append(out, fmt.Sprint(d))
	}
	return strings.Join(out, ", ")
}

func (pl *planner) fitSummary(bNo, bCk int64, mode string) string {
	switch {
	case bNo < 1 && bCk < 1:
		return "not even one sample fits"
	case mode == "none" || bCk <= bNo:
		return fmt.Sprintf("the largest batch that fits is %d", bNo)
	case bNo < 1:
		return fmt.Sprintf("the largest batch that fits is %d, with checkpointing", bCk)
	default:
		return fmt.Sprintf("the largest batch that fits is %d, or %d with checkpointing", bNo, bCk)
	}
}

// noFit reports that the plan does not fit: at the batch line, or at the
// model's name when not even one sample fits.
func (pl *planner) noFit(s batchSpec, b, bNo, bCk, base, minPk, extra, budget int64, mode string) {
	m := pl.cost
	static := m.static.total()
	best := minPk
	if mode == "none" {
		best = base
	}
	if bNo < 1 && bCk < 1 {
		r := pl.model.NameRange
		what := "with full checkpointing"
		if mode == "none" {
			what = "without checkpointing (checkpoint none)"
		}
		parts := fmt.Sprintf("%s of activations, %s of workspace, %s of input", FormatBytes(best), FormatBytes(m.workspace), FormatBytes(m.input))
		if m.cpu != nil {
			parts = fmt.Sprintf("%s of activations with their gradients, %s for evaluation, %s of loader buffers", FormatBytes(best), FormatBytes(m.eval), FormatBytes(extra))
		}
		detail := fmt.Sprintf("One sample %s needs %s: %s of parameters, gradients and optimizer state, and %s per sample (%s). The budget on %s is %s (%s less a %.0f%% margin",
			what, FormatBytes(m.total(1, best, extra)), FormatBytes(static),
			FormatBytes(m.perSample(best, extra)), parts,
			pl.dev.Name, FormatBytes(budget), FormatBytes(pl.dev.Memory), pl.plan.Memory.MarginPercent)
		if pl.plan.Memory.Reserve > 0 {
			detail += " and " + FormatBytes(pl.plan.Memory.Reserve) + " kept for the system"
		}
		detail += ")." + pl.ganNoFit(1)
		if pl.plan.WorldSize() <= 1 {
			detail += " Use a device with more memory (pipe devices lists them), a smaller model, or a smaller input."
		}
		if static > budget {
			detail += fmt.Sprintf(" The %s parameters alone take %s before any activation.", FormatCount(m.params), FormatBytes(static))
		}
		detail += pl.shardNote(m.total(1, best, extra), budget)
		pl.diags = append(pl.diags, &diag.Diagnostic{Severity: diag.Error, Code: CodeNoFit,
			Summary: fmt.Sprintf("model %s does not fit on %s even at batch 1", pl.model.Name, pl.dev.Name),
			Detail:  detail, Subject: &r})
		return
	}
	at := s.subject()
	if at == nil && !s.fromFlag {
		r := pl.model.NameRange
		at = &r
	}
	need := m.total(b, base, extra)
	if mode == "all" {
		need = m.total(b, minPk, extra)
	}
	detail := fmt.Sprintf("Batch %d needs %s (%s per sample on top of %s of parameters and optimizer state); the budget on %s is %s. %s",
		b, FormatBytes(need), FormatBytes(m.perSample(base, extra)), FormatBytes(static), pl.dev.Name, FormatBytes(budget),
		strings.ToUpper(pl.fitSummary(bNo, bCk, mode)[:1])+pl.fitSummary(bNo, bCk, mode)[1:]+".")
	detail += pl.ganNoFit(b)
	if mode == "none" && bCk > bNo {
		detail += fmt.Sprintf(" With checkpoint auto, %d would fit.", bCk)
	}
	detail += s.flagNote()
	fit := bNo
	if mode != "none" && bCk > bNo {
		fit = bCk
	}
	pl.diags = append(pl.diags, &diag.Diagnostic{Severity: diag.Error, Code: CodeNoFit,
		Summary: fmt.Sprintf("%s does not fit on %s", s.name(b), pl.dev.Name), Detail: detail, Subject: at,
		Suggestion: suggestBatch(s, fit)})
}

func suggestBatch(s batchSpec, fit int64) string {
	if s.fromFlag || s.explicit == 0 || fit < 1 {
		return ""
	}
	return fmt.Sprintf("batch %d", fit)
}

// checkpointDecision explains the checkpoint plan at batch b; fits says
// whether the batch fits at all, so that the reason never says "fit" of a
// batch the numbers beside it say does not.
func (pl *planner) checkpointDecision(mode string, b int64, r ckptResult, base int64, fits bool) {
	m := pl.cost
	before := FormatBytes(m.peakBytes(base, b))
	// On the CPU the peak is the executor's arena: the activations with
	// their gradients and the input's copy.
	what := "activations"
	if m.cpu != nil {
		what = "activations with their gradients"
	}
	if len(r.Segments) == 0 {
		switch {
		case mode == "none":
			pl.decide("checkpoint", "none", fmt.Sprintf("checkpoint none: nothing is recomputed; %s peak at %s.", what, before))
		case !fits:
			_, minPk, _ := m.minPlan()
			pl.decide("checkpoint", "none", fmt.Sprintf("checkpoint %s: the %s take %s at batch %d, and even recomputing as much as saves the most memory they would take %s; batch %d does not fit, with checkpointing or without, so this plan recomputes nothing.",
				mode, what, before, b, FormatBytes(m.peakBytes(minPk, b)), b))
		default:
			pl.decide("checkpoint", "none", fmt.Sprintf("checkpoint %s: the %s (%s at batch %d) fit, so nothing is recomputed.", mode, what, before, b))
		}
		return
	}
	fwd := pl.graph.FLOPs()
	pct := 0.0
	if fwd > 0 {
		pct = 100 * float64(r.Extra) / (3 * float64(fwd))
	}
	var nodes int
	for _, s := range r.Segments {
		nodes += s.To - s.From + 1
	}
	why := "the " + what + " do not fit at this batch"
	if mode == "all" {
		why = "checkpoint all asks for the least memory"
	}
	opt := "the least extra compute under the budget"
	if mode == "all" {
		opt = "the least memory, then the least extra compute"
	}
	reason := fmt.Sprintf("checkpoint %s: %s, so %d segments (%d of %d nodes) are recomputed in the backward, chosen by dynamic programming for %s: %s peak at %s instead of %s, for %.1f%% more FLOPs per step.",
		mode, why, len(r.Segments), nodes, len(pl.graph.Nodes), opt, what, FormatBytes(m.peakBytes(r.Peak, b)), before, pct)
	switch {
	case r.Cuts > 0:
		reason += fmt.Sprintf(" The graph's %d nodes are more than the exact programme takes (%d), so segments start and end only at %d cuts, each where the fewest bytes cross in its stretch of the graph: the plan is the best of those, not proven optimal.",
			len(pl.graph.Nodes), maxCuts-1, r.Cuts)
	case !r.Exact:
		reason += fmt.Sprintf(" The programme merged plans whose kept memory differs by less than 1/%d of the budget, so the plan is not proven optimal.", resolution)
	}
	pl.decide("checkpoint", fmt.Sprintf("%d segments", len(r.Segments)), reason)
}

func (pl *planner) accumDecision(E, b, accum int64, auto bool) {
	switch {
	case E == 0:
		pl.decide("accumulation", "1", fmt.Sprintf("no effective_batch: each batch of %d is one optimizer update.", b))
	case accum == 1 && E == b:
		pl.decide("accumulation", "1", fmt.Sprintf("the batch is the whole effective_batch %d.", E))
	case E%b == 0:
		pl.decide("accumulation", fmt.Sprint(accum), fmt.Sprintf("%d micro-batches of %d make effective_batch %d exactly.", accum, b, E))
	}
}

// lr scales the learning rate linearly when the batch that runs differs
// from the one the lr was written for (Goyal et al. 2017), with warm-up.
func (pl *planner) lr(o plan.Optimizer, b, accum, fileBatch int64) {
	p := pl.plan
	given := pl.train.Optimizer != nil && pl.train.Optimizer.LR != nil
	ref := fileBatch
	refWhat := "the file's batch"
	if ref == 0 && pl.train.EffectiveBatch > 0 {
		ref, refWhat = pl.train.EffectiveBatch, "the effective_batch"
	}
	running := mul(mul(b, accum), int64(pl.plan.WorldSize()))
	o.ReferenceBatch = ref
	if sc := pl.train.Schedule; sc != nil && sc.Warmup != nil {
		o.WarmupEpochs = *sc.Warmup
	}
	switch {
	case !given:
		pl.decide("lr", fmt.Sprintf("%.6g", o.LR), fmt.Sprintf("no lr written: the default %g, unscaled.", o.LR))
	case ref == 0:
		pl.decide("lr", fmt.Sprintf("%.6g", o.LR), "as written: neither a batch nor an effective_batch says which batch it was tuned for, so it is not scaled.")
	case running == ref:
		pl.decide("lr", fmt.Sprintf("%.6g", o.LR), fmt.Sprintf("as written: the batch per update (%d) is %s it was written for.", running, refWhat))
	default:
		o.LRScale = float64(running) / float64(ref)
		o.LR = o.LRWritten * o.LRScale
		pl.decide("lr", fmt.Sprintf("%.6g", o.LR), fmt.Sprintf("scaled linearly by %d/%d: %.6g was written for %s (%d) and %d samples make each update.",
			running, ref, o.LRWritten, refWhat, ref, running))
		if o.LRScale > 1 && o.WarmupEpochs == 0 {
			epochs := pl.train.Epochs
			o.WarmupEpochs = max(1, min(5, epochs/5))
			pl.decide("warmup", plural(o.WarmupEpochs, "epoch"),
				fmt.Sprintf("the scaled-up lr starts with %s of linear warm-up from 0, as large-batch training needs (the schedule gives none).", plural(o.WarmupEpochs, "epoch")))
		}
	}
	p.Optimizer = o
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// staticBatch reports what is wrong with the batch and effective_batch
// whatever the device, and returns the accumulation an explicit batch
// makes (0 when it makes none or is wrong). pipe check reports the same
// (CheckStatic).
func (pl *planner) staticBatch(s batchSpec) (accum int64) {
	b, E := s.explicit, s.effective
	if E <= 0 {
		return 0
	}
	if b > 0 {
		switch {
		case b > E:
			pl.errorf(s.effAt, "batch-exceeds-effective", fmt.Sprintf("%s is larger than effective_batch %d", s.name(b), E),
				"effective_batch is the samples per optimizer update, made of whole batches; raise it to a multiple of %d or lower the batch to a divisor of %d (%s).",
				b, E, divisorList(E))
		case E%b != 0:
			pl.errorf(s.effAt, "batch-not-divisor", fmt.Sprintf("%s does not divide effective_batch %d", s.name(b), E),
				"Accumulation reaches effective_batch exactly only in whole batches: use a batch among the divisors of %d (%s), or batch auto.",
				E, divisorList(E))
		default:
			return E / b
		}
		return 0
	}
	if lo := max(s.min, 1); E < lo {
		pl.errorf(s.effAt, "effective-below-min", fmt.Sprintf("effective_batch %d is below the batch's minimum %d", E, lo),
			"The micro-batch divides effective_batch, so it cannot reach auto(min %d); lower the minimum or raise effective_batch.", lo)
	}
	return 0
}

// CheckStatic reports the planner's findings that need no device: a
// batch and an effective_batch that cannot go together, a train block
// that does not say which of several models it trains, a path at a URL
// pipe cannot serve (stdlib.CheckLocations). pipe check runs it on the
// decoded program, so that check reports every mistake pipe plan would
// report on any device.
func CheckStatic(prog *stdlib.Program) diag.Diagnostics {
	if prog == nil {
		return nil
	}
	pl := newPlanner(prog, config{}, HostInfo{})
	pl.plan = &plan.Plan{}
	pl.diags = append(pl.diags, stdlib.CheckLocations(prog.Spec)...)
	pl.setTrain()
	if len(prog.Spec.Models) > 0 {
		pl.pickModel()
	}
	pl.staticBatch(pl.batchSpec())
	pl.diags.Sort()
	return pl.diags
}

// shardNote says, for a model that does not fit one device even at batch
// 1 (need bytes against budget), why more devices of data parallelism do
// not help and what would: sharded data parallelism (ZeRO-3, PyTorch's
// FSDP) splits the parameters, master weights, gradients and optimizer
// state over the devices, and gathers each layer's parameters while it
// runs. pipe does not shard yet; the note says so.
func (pl *planner) shardNote(need, budget int64) string {
	st := pl.cost.static
	shardable := sum(st.parameters, st.master, st.gradients, st.optimizer)
	var layer int64 // the largest layer's parameters and gradients, gathered
	for _, nd := range pl.graph.Nodes {
		layer = max(layer, mul(nd.Params, 8))
	}
	rest := add(sub(need, shardable), layer)
	at := func(w int64) int64 { return add(rest, shardable/w) }
	w := int64(pl.plan.WorldSize())
	var note string
	if w > 1 {
		note = fmt.Sprintf(" More devices do not help: data parallelism keeps the whole model, its gradients and optimizer state (%s) on each of the %d devices.", FormatBytes(shardable), w)
	}
	switch {
	case rest > budget:
		return note + fmt.Sprintf(" Sharding them over the devices would not make it fit either: the activations of one sample and the largest layer's gathered parameters and gradients take %s.", FormatBytes(rest))
	case w > 1 && at(w) <= budget:
		note += fmt.Sprintf(" Sharded data parallelism (ZeRO-3, PyTorch's FSDP) would split them over the %d devices, about %s a device at batch 1, which fits;", w, FormatBytes(at(w)))
	default:
		k := max(2, (shardable+budget-rest-1)/(budget-rest)) // the fewest k with rest + shardable/k ≤ budget
		for at(k) > budget {
			k++
		}
		note += fmt.Sprintf(" Sharded data parallelism (ZeRO-3, PyTorch's FSDP) would split them over the devices and fit on %d of them (about %s a device at batch 1);", k, FormatBytes(at(k)))
	}
	note += " pipe does not shard yet (a later step)"
	if w > 1 {
		return note + ": until it does, use a smaller model or a smaller input."
	}
	return note + "."
}
