package native

import (
	"fmt"
	"math"

	"pipe/dataset/samples"
	"pipe/engine"
)

// lossFn computes a loss and its gradient from the model's output. The
// output is in the model's layout (CNHW or NF) and the targets and mask
// arrive NCHW, so every loop indexes both through (sample, channel,
// position). Sums over the batch are split by samples across the workers
// and added in worker order; each worker's sums run in a fixed order, so
// the loss is the same bit for bit run after run.
type lossFn struct {
	kind string
	// throughLast: the model ends in softmax (cross_entropy) or sigmoid
	// (bce); the loss reads the logits before it and its gradient skips
	// it.
	throughLast bool
	// sigmoidIn: dice applies the sigmoid itself (the model does not end
	// in one).
	sigmoidIn bool
	out       layout
	k, s      int
	partial   []float64 // per worker
	dice      [][3]float64
}

// newLoss makes the loss for a model whose output has layout out and
// whose last op is lastOp; alone says that op is a unit of its own.
func newLoss(kind string, out layout, lastOp string, alone bool, workers int) (*lossFn, error) {
	l := &lossFn{kind: kind, out: out, k: out.c, s: out.s()}
	switch kind {
	case "cross_entropy":
		l.throughLast = lastOp == "softmax" && alone
	case "bce":
		l.throughLast = lastOp == "sigmoid" && alone
	case "dice":
		l.sigmoidIn = lastOp != "sigmoid"
		l.dice = make([][3]float64, workers*out.c)
	case "mse", "mae":
	default:
		return nil, fmt.Errorf("%w: loss %q (the cpu backend has cross_entropy, bce, mse, mae and dice)", engine.ErrUnsupported, kind)
	}
	l.partial = make([]float64, workers)
	return l, nil
}

// index says the targets are class indices, one per position.
func (l *lossFn) index(b *samples.Batch) bool {
	return l.kind == "cross_entropy" && len(b.Y) == b.N*l.s && l.k > 1
}

// checkTargets rejects targets and masks of the wrong size, and class
// indices that are not integers in [0, K).
func (l *lossFn) checkTargets(m *model, b *samples.Batch) error {
	n := b.N
	per := l.k * l.s
	switch {
	case l.index(b):
		for i := 0; i < n; i++ {
			for p := 0; p < l.s; p++ {
				j := i*l.s + p
				if b.Mask != nil && len(b.Mask) == len(b.Y) && b.Mask[j] == 0 {
					continue
				}
				v := b.Y[j]
				if v != float32(math.Floor(float64(v))) || v < 0 || int(v) >= l.k {
					return fmt.Errorf("%w: %s holds class %v, but the model's output has %d classes (0 to %d)", engine.ErrBadBatch, sampleName(b, i), v, l.k, l.k-1)
				}
			}
		}
	case len(b.Y) != n*per:
		want := fmt.Sprintf("%d values per sample (the output's shape %v)", per, outShape(l.out))
		if l.kind == "cross_entropy" {
			want = fmt.Sprintf("%d class index per sample%s or %d probabilities", l.s, map[bool]string{true: " position", false: ""}[l.s > 1], per)
		}
		return fmt.Errorf("%w: the batch's targets hold %d values for %d samples; %s needs %s", engine.ErrBadBatch, len(b.Y), n, l.kind, want)
	}
	if b.Mask != nil && len(b.Mask) != len(b.Y) {
		return fmt.Errorf("%w: the batch's mask holds %d values but its targets %d", engine.ErrBadBatch, len(b.Mask), len(b.Y))
	}
	return nil
}

func sampleName(b *samples.Batch, i int) string {
	if i < len(b.Indices) {
		return fmt.Sprintf("sample %d (batch row %d)", b.Indices[i], i)
	}
	return fmt.Sprintf("batch row %d", i)
}

func outShape(l layout) []int {
	if l.spatial {
		if l.vol() {
			return []int{l.c, l.d, l.h, l.w}
		}
		return []int{l.c, l.h, l.w}
	}
	return []int{l.c}
}

// at returns the offset of (sample i, channel c, position p) in the
// model's layout for n samples.
func (l *lossFn) at(n, i, c, p int) int {
	if l.out.spatial {
		return (c*n+i)*l.s + p
	}
	return i*l.k + c
}

// eval computes the mean loss of the batch from the schedule's output
// and, when grad, writes scale times its gradient into the schedule's
// seed buffer.
func (l *lossFn) eval(m *model, s *sched, b *samples.Batch, scale float64, grad bool) float64 {
	n := b.N
	pred := s.predS
	if l.throughLast {
		pred = s.logitsS
	}
	var g []float32
	if grad {
		g = s.seedS
	}
	mask := b.Mask
	weight := func(j int) float64 {
		if mask == nil {
			return 1
		}
		return float64(mask[j])
	}
	index := l.index(b)
	// The mean is over valid positions (cross_entropy) or valid values.
	var denom float64
	switch {
	case mask == nil && l.kind == "cross_entropy":
		denom = float64(n * l.s)
	case mask == nil:
		denom = float64(n * l.k * l.s)
	case l.kind == "cross_entropy" && !index:
		for i := 0; i < n; i++ {
			for p := 0; p < l.s; p++ {
				denom += weight(i*l.k*l.s + p)
			}
		}
	default:
		for _, v := range mask {
			denom += float64(v)
		}
	}
	if l.kind == "dice" {
		return l.diceLoss(m, pred, b, g, scale, weight)
	}
	if denom == 0 {
		if g != nil {
			clear(g[:n*l.k*l.s])
		}
		return 0
	}
	coef := scale / denom
	w := m.pool.n
	part := l.partial[:w]
	clear(part)
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(n, wk)
		var sum float64
		for i := lo; i < hi; i++ {
			switch l.kind {
			case "cross_entropy":
				for p := 0; p < l.s; p++ {
					var wt float64
					if index {
						wt = weight(i*l.s + p)
					} else {
						wt = weight(i*l.k*l.s + p)
					}
					mx := math.Inf(-1)
					for c := 0; c < l.k; c++ {
						mx = math.Max(mx, float64(pred[l.at(n, i, c, p)]))
					}
					var se float64
					for c := 0; c < l.k; c++ {
						se += math.Exp(float64(pred[l.at(n, i, c, p)]) - mx)
					}
					lse := mx + math.Log(se)
					label := -1
					var tsum float64
					if index {
						label = int(b.Y[i*l.s+p])
						if wt != 0 {
							sum += wt * (lse - float64(pred[l.at(n, i, label, p)]))
						}
						tsum = 1
					} else {
						for c := 0; c < l.k; c++ {
							t := float64(b.Y[(i*l.k+c)*l.s+p])
							tsum += t
							if wt != 0 && t != 0 {
								sum += wt * t * (lse - float64(pred[l.at(n, i, c, p)]))
							}
						}
					}
					if g == nil {
						continue
					}
					f := coef * wt
					for c := 0; c < l.k; c++ {
						j := l.at(n, i, c, p)
						sm := math.Exp(float64(pred[j]) - lse)
						var t float64
						if index {
							if c == label {
								t = 1
							}
						} else {
							t = float64(b.Y[(i*l.k+c)*l.s+p])
						}
						g[j] = float32(f * (sm*tsum - t))
					}
				}
			default:
				for c := 0; c < l.k; c++ {
					for p := 0; p < l.s; p++ {
						j := l.at(n, i, c, p)
						tj := (i*l.k+c)*l.s + p
						wt := weight(tj)
						z, t := float64(pred[j]), float64(b.Y[tj])
						var v, d float64
						switch l.kind {
						case "bce":
							v = math.Max(z, 0) - z*t + math.Log1p(math.Exp(-math.Abs(z)))
							d = sigmoid64(z) - t
						case "mse":
							v = (z - t) * (z - t)
							d = 2 * (z - t)
						case "mae":
							v = math.Abs(z - t)
							switch {
							case z > t:
								d = 1
							case z < t:
								d = -1
							}
						}
						if wt != 0 {
							sum += wt * v
						}
						if g != nil {
							g[j] = float32(coef * wt * d)
						}
					}
				}
			}
		}
		part[wk] = sum
	})
	var total float64
	for _, v := range part {
		total += v
	}
	return total / denom
}

func sigmoid64(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// diceSmooth is added to the numerator and the denominator of every
// channel's Dice coefficient, so an empty mask with an empty prediction
// scores 1 and the gradient stays finite.
const diceSmooth = 1

// diceLoss is 1 - mean_c (2·Σ w·p·t + 1) / (Σ w·p + Σ w·t + 1).
func (l *lossFn) diceLoss(m *model, pred []float32, b *samples.Batch, g []float32, scale float64, weight func(int) float64) float64 {
	n := b.N
	w := m.pool.n
	sums := l.dice[:w*l.k]
	clear(sums)
	prob := func(j int) float64 {
		if l.sigmoidIn {
			return sigmoid64(float64(pred[j]))
		}
		return float64(pred[j])
	}
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(n, wk)
		for i := lo; i < hi; i++ {
			for c := 0; c < l.k; c++ {
				s := &sums[wk*l.k+c]
				for p := 0; p < l.s; p++ {
					tj := (i*l.k+c)*l.s + p
					wt := weight(tj)
					pv, t := prob(l.at(n, i, c, p)), float64(b.Y[tj])
					s[0] += wt * pv * t
					s[1] += wt * pv
					s[2] += wt * t
				}
			}
		}
	})
	tot := make([][3]float64, 0, 8)
	var loss float64
	for c := 0; c < l.k; c++ {
		var s [3]float64
		for wk := 0; wk < w; wk++ {
			for q := 0; q < 3; q++ {
				s[q] += sums[wk*l.k+c][q]
			}
		}
		tot = append(tot, s)
		loss += (2*s[0] + diceSmooth) / (s[1] + s[2] + diceSmooth)
	}
	loss = 1 - loss/float64(l.k)
	if g == nil {
		return loss
	}
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(n, wk)
		for i := lo; i < hi; i++ {
			for c := 0; c < l.k; c++ {
				s := tot[c]
				den := s[1] + s[2] + diceSmooth
				num := 2*s[0] + diceSmooth
				for p := 0; p < l.s; p++ {
					j := l.at(n, i, c, p)
					tj := (i*l.k+c)*l.s + p
					t := float64(b.Y[tj])
					d := -weight(tj) * (2*t*den - num) / (den * den) / float64(l.k) * scale
					if l.sigmoidIn {
						pv := prob(j)
						d *= pv * (1 - pv)
					}
					g[j] = float32(d)
				}
			}
		}
	})
	return loss
}
