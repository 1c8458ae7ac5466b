package sweep

import (
	"math"
	"math/rand/v2"
	"sort"
	"strconv"

	"pipe/lang"
)

// An Observation is a finished trial as a sampler sees it: its values,
// one per parameter in the sweep's order, and its score, lower better
// (the metric, negated when it is maximised; +Inf for a trial that
// could not run, so that its region counts as bad).
type Observation struct {
	Values []string
	Score  float64
}

// A Sampler proposes the values of the next trial from the finished ones.
type Sampler interface {
	Suggest(params []lang.SweepParam, history []Observation, rng *rand.Rand) []string
}

// Random draws every parameter independently from its range.
type Random struct{}

// Suggest implements Sampler.
func (Random) Suggest(params []lang.SweepParam, _ []Observation, rng *rand.Rand) []string {
	out := make([]string, len(params))
	for i, p := range params {
		out[i] = format(p, drawValue(p, rng))
	}
	return out
}

// A parameter's value in the sampler's own space: the index of a choice,
// the logarithm for loguniform (and int log), the number itself else.
func drawValue(p lang.SweepParam, rng *rand.Rand) float64 {
	if p.Kind == "choice" {
		return float64(rng.IntN(len(p.Choices)))
	}
	lo, hi := space(p)
	return lo + rng.Float64()*(hi-lo)
}

// space is the interval a continuous parameter is drawn in.
func space(p lang.SweepParam) (lo, hi float64) {
	lo, hi = p.Low, p.High
	if p.Kind == "int" {
		lo, hi = lo-0.5, hi+0.5 // each integer gets an equal share
		if p.Log {
			lo = math.Max(lo, 0.5)
		}
	}
	if p.Kind == "loguniform" || p.Log {
		return math.Log(lo), math.Log(hi)
	}
	return lo, hi
}

// format writes a value of p's space as the file would: a choice as
// written, an int as an integer, a number with 4 significant digits.
func format(p lang.SweepParam, x float64) string {
	switch {
	case p.Kind == "choice":
		return p.Choices[int(x)]
	case p.Kind == "loguniform" || p.Log:
		x = math.Exp(x)
	}
	if p.Kind == "int" {
		n := math.Round(x)
		n = math.Max(p.Low, math.Min(p.High, n))
		return strconv.FormatInt(int64(n), 10)
	}
	x = math.Max(p.Low, math.Min(p.High, x))
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// unformat reads a value back into p's space; ok false when it is not
// one of p's (a history from a different sweep).
func unformat(p lang.SweepParam, s string) (float64, bool) {
	if p.Kind == "choice" {
		for i, c := range p.Choices {
			if c == s {
				return float64(i), true
			}
		}
		return 0, false
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	if p.Kind == "loguniform" || p.Log {
		if x <= 0 {
			return 0, false
		}
		x = math.Log(x)
	}
	return x, true
}

// TPE is the tree-structured Parzen estimator of Bergstra, Bardenet,
// Bengio and Kégl, "Algorithms for Hyper-Parameter Optimization" (NIPS
// 2011), univariate as there: the finished trials are split at the
// quantile Gamma of their scores into good and bad; each parameter gets
// a density l(x) from the good trials' values and g(x) from the bad
// ones' (Parzen estimators: a truncated Gaussian at each value, plus one
// wide prior component; for a choice, counts plus a prior of one); Cands
// values are drawn from l and the one with the largest l(x)/g(x) wins.
// The first Startup trials, and any while fewer than two have finished,
// are Random.
type TPE struct {
	Startup int
	Gamma   float64
	// Cands is the number of candidates drawn from l; 24 when 0, as in
	// the paper's implementation.
	Cands int
}

// Suggest implements Sampler.
func (t TPE) Suggest(params []lang.SweepParam, history []Observation, rng *rand.Rand) []string {
	if len(history) < max(t.Startup, 2) {
		return Random{}.Suggest(params, history, rng)
	}
	obs := append([]Observation(nil), history...)
	sort.SliceStable(obs, func(i, j int) bool { return obs[i].Score < obs[j].Score })
	gamma := t.Gamma
	if gamma <= 0 || gamma >= 1 {
		gamma = 0.25
	}
	nGood := max(1, int(math.Ceil(gamma*float64(len(obs)))))
	nGood = min(nGood, len(obs)-1)
	cands := t.Cands
	if cands <= 0 {
		cands = 24
	}
	out := make([]string, len(params))
	for i, p := range params {
		var good, bad []float64
		for k, o := range obs {
			if i >= len(o.Values) {
				continue
			}
			x, ok := unformat(p, o.Values[i])
			if !ok {
				continue
			}
			if k < nGood {
				good = append(good, x)
			} else {
				bad = append(bad, x)
			}
		}
		if p.Kind == "choice" {
			out[i] = format(p, tpeChoice(len(p.Choices), good, bad, cands, rng))
			continue
		}
		lo, hi := space(p)
		l, g := newParzen(good, lo, hi), newParzen(bad, lo, hi)
		best, bestScore := 0.0, math.Inf(-1)
		for range cands {
			x := l.sample(rng)
			if s := l.logPDF(x) - g.logPDF(x); s > bestScore {
				best, bestScore = x, s
			}
		}
		out[i] = format(p, best)
	}
	return out
}

// tpeChoice draws cands indices from the good trials' counts (each
// choice given a prior count of one) and keeps the one whose share among
// the good is largest against its share among the bad.
func tpeChoice(n int, good, bad []float64, cands int, rng *rand.Rand) float64 {
	weights := func(xs []float64) []float64 {
		w := make([]float64, n)
		total := float64(n)
		for i := range w {
			w[i] = 1
		}
		for _, x := range xs {
			w[int(x)]++
			total++
		}
		for i := range w {
			w[i] /= total
		}
		return w
	}
	l, g := weights(good), weights(bad)
	best, bestScore := 0, math.Inf(-1)
	for range cands {
		u, k := rng.Float64(), 0
		for k < n-1 && u >= l[k] {
			u -= l[k]
			k++
		}
		if s := math.Log(l[k]) - math.Log(g[k]); s > bestScore {
			best, bestScore = k, s
		}
	}
	return float64(best)
}

// parzen is a mixture of Gaussians truncated to [lo, hi], equal weights:
// one at each observation and a prior one at the middle of the range as
// wide as the range. Each observation's width is the larger distance to
// its neighbours (the prior's centre among them), clipped to between
// (hi-lo)/min(100, n+1) and hi-lo, as the paper's implementation does.
type parzen struct {
	mu, sigma []float64
	lo, hi    float64
}

func newParzen(xs []float64, lo, hi float64) parzen {
	width := hi - lo
	prior := (lo + hi) / 2
	mus := append(append([]float64(nil), xs...), prior)
	sort.Float64s(mus)
	sig := make([]float64, len(mus))
	minSig := width / math.Min(100, float64(len(mus)))
	for i, m := range mus {
		left, right := m-lo, hi-m
		if i > 0 {
			left = m - mus[i-1]
		}
		if i < len(mus)-1 {
			right = mus[i+1] - m
		}
		sig[i] = math.Max(minSig, math.Min(width, math.Max(left, right)))
	}
	// The prior keeps the whole range's width.
	for i, m := range mus {
		if m == prior {
			sig[i] = width
			break
		}
	}
	return parzen{mu: mus, sigma: sig, lo: lo, hi: hi}
}

func (p parzen) sample(rng *rand.Rand) float64 {
	k := rng.IntN(len(p.mu))
	for range 100 {
		if x := p.mu[k] + p.sigma[k]*rng.NormFloat64(); x >= p.lo && x <= p.hi {
			return x
		}
	}
	return p.lo + rng.Float64()*(p.hi-p.lo)
}

func (p parzen) logPDF(x float64) float64 {
	total := 0.0
	for k, m := range p.mu {
		s := p.sigma[k]
		mass := normCDF((p.hi-m)/s) - normCDF((p.lo-m)/s)
		if mass <= 0 {
			continue
		}
		z := (x - m) / s
		total += math.Exp(-z*z/2) / (s * math.Sqrt(2*math.Pi) * mass)
	}
	return math.Log(total/float64(len(p.mu)) + 1e-300)
}

func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }
