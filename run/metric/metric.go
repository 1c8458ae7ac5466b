package metric

import (
	"fmt"
	"math"
	"slices"
)

// Names lists the metrics this package computes, in the order Values
// reports them.
var Names = []string{"accuracy", "miou", "f1", "mae", "rmse", "psnr"}

// Kind is the relation between outputs and targets.
type Kind int

const (
	// Classes: K scores per position, arg-max is the class.
	Classes Kind = iota
	// Binary: each output element against a threshold.
	Binary
	// Regression: outputs compared with targets element by element.
	Regression
)

func (k Kind) String() string {
	switch k {
	case Classes:
		return "classification"
	case Binary:
		return "binary classification"
	case Regression:
		return "regression"
	}
	return "unknown"
}

// Task describes one sample's output and target.
type Task struct {
	Kind Kind
	// OutShape is one sample's output shape: [K] or [K, H, W].
	OutShape []int64
	// YShape is one sample's target shape: [] or [1, H, W] for class
	// indices, OutShape for per-element targets.
	YShape []int64
	// Threshold separates Binary's negatives from its positives: 0 for
	// logits, 0.5 for probabilities.
	Threshold float64
}

// Fits reports whether a metric can be computed for the task, and why not.
func (t Task) Fits(name string) error {
	switch name {
	case "accuracy", "miou", "f1":
		if t.Kind == Regression {
			return fmt.Errorf("%s needs class predictions; this model's outputs are compared with numeric targets (regression): use mae or rmse", name)
		}
	case "mae", "rmse", "psnr":
		if t.Kind != Regression {
			return fmt.Errorf("%s measures numeric errors; this model predicts classes (%s): use accuracy, miou or f1", name, t.Kind)
		}
	default:
		return fmt.Errorf("unknown metric %q (known: %v)", name, Names)
	}
	return nil
}

// Value is one metric's value.
type Value struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Set accumulates the metrics of one evaluation.
type Set struct {
	names []string
	t     Task
	k     int // channels of the output
	s     int // positions per channel
	per   bool
	conf  []int64 // k×k (Classes) or 2×2 (Binary): conf[target*k + pred]
	ncls  int
	abs   float64
	sq    float64
	count int64
	// ylo and yhi are the least and greatest target measured (psnr's
	// range).
	ylo, yhi float64
}

// New returns an empty set of the named metrics for the task; a metric
// that does not fit the task is an error (Task.Fits).
func New(names []string, t Task) (*Set, error) {
	for _, n := range names {
		if err := t.Fits(n); err != nil {
			return nil, err
		}
	}
	s := &Set{names: slices.Clone(names), t: t}
	s.k, s.s = 1, 1
	if len(t.OutShape) > 0 {
		s.k = int(t.OutShape[0])
		for _, d := range t.OutShape[1:] {
			s.s *= int(d)
		}
	}
	out := s.k * s.s
	y := 1
	for _, d := range t.YShape {
		y *= int(d)
	}
	switch t.Kind {
	case Classes:
		s.ncls = max(s.k, 2)
		switch y {
		case s.s:
			s.per = false // one class index per position
		case out:
			s.per = true // one value per output element
		default:
			return nil, fmt.Errorf("targets of shape %v do not fit outputs of shape %v", t.YShape, t.OutShape)
		}
	case Binary:
		s.ncls = 2
		if y != out {
			return nil, fmt.Errorf("targets of shape %v do not fit outputs of shape %v", t.YShape, t.OutShape)
		}
	case Regression:
		if y != out {
			return nil, fmt.Errorf("targets of shape %v do not fit outputs of shape %v", t.YShape, t.OutShape)
		}
	}
	if s.ncls > 0 {
		s.conf = make([]int64, s.ncls*s.ncls)
	}
	return s, nil
}

// Add accumulates n samples: out holds n outputs, y n targets and mask
// (nil when every position counts) n masks shaped like y.
func (s *Set) Add(n int, out, y, mask []float32) error {
	outN := s.k * s.s
	if len(out) < n*outN {
		return fmt.Errorf("metric: %d outputs for %d samples of %d", len(out), n, outN)
	}
	switch s.t.Kind {
	case Classes:
		return s.addClasses(n, out, y, mask)
	case Binary:
		if len(y) < n*outN {
			return fmt.Errorf("metric: %d targets for %d samples of %d", len(y), n, outN)
		}
		th := float32(s.t.Threshold)
		for i := range n * outN {
			if mask != nil && mask[i] == 0 {
				continue
			}
			p, t := 0, 0
			if out[i] > th {
				p = 1
			}
			if y[i] >= 0.5 {
				t = 1
			}
			s.conf[t*2+p]++
		}
	case Regression:
		if len(y) < n*outN {
			return fmt.Errorf("metric: %d targets for %d samples of %d", len(y), n, outN)
		}
		for i := range n * outN {
			if mask != nil && mask[i] == 0 {
				continue
			}
			t := float64(y[i])
			d := float64(out[i]) - t
			s.abs += math.Abs(d)
			s.sq += d * d
			if s.count == 0 {
				s.ylo, s.yhi = t, t
			}
			s.ylo, s.yhi = min(s.ylo, t), max(s.yhi, t)
			s.count++
		}
	}
	return nil
}

func (s *Set) addClasses(n int, out, y, mask []float32) error {
	k, sp := s.k, s.s
	perY := sp
	if s.per {
		perY = k * sp
	}
	if len(y) < n*perY {
		return fmt.Errorf("metric: %d targets for %d samples of %d", len(y), n, perY)
	}
	argmax := func(v []float32, base int) int {
		best, bi := v[base], 0
		for c := 1; c < k; c++ {
			if x := v[base+c*sp]; x > best || (best != best && x == x) {
				best, bi = x, c
			}
		}
		return bi
	}
	for i := range n {
		ob := i * k * sp
		yb := i * perY
		for p := range sp {
			var t int
			if s.per {
				if mask != nil && mask[yb+p] == 0 {
					continue
				}
				t = argmax(y, yb+p)
			} else {
				if mask != nil && mask[yb+p] == 0 {
					continue
				}
				t = int(y[yb+p])
			}
			var pr int
			if k == 1 {
				// One score per position with class indices: a binary
				// classifier scoring class 1.
				if float64(out[ob+p]) > s.t.Threshold {
					pr = 1
				}
			} else {
				pr = argmax(out, ob+p)
			}
			if t < 0 || t >= s.ncls {
				return fmt.Errorf("metric: target class %d outside [0, %d)", t, s.ncls)
			}
			s.conf[t*s.ncls+pr]++
		}
	}
	return nil
}

// Count is the number of positions (or elements) measured so far.
func (s *Set) Count() int64 {
	if s.conf == nil {
		return s.count
	}
	var c int64
	for _, v := range s.conf {
		c += v
	}
	return c
}

// Values returns each metric asked for, in the order New was given them.
// A metric over no position at all is NaN.
func (s *Set) Values() []Value {
	out := make([]Value, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, Value{Name: n, Value: s.value(n)})
	}
	return out
}

func (s *Set) value(name string) float64 {
	switch name {
	case "mae":
		if s.count == 0 {
			return math.NaN()
		}
		return s.abs / float64(s.count)
	case "rmse":
		if s.count == 0 {
			return math.NaN()
		}
		return math.Sqrt(s.sq / float64(s.count))
	case "psnr":
		r := s.yhi - s.ylo
		if s.count == 0 || r <= 0 {
			return math.NaN()
		}
		return 10 * math.Log10(r*r/(s.sq/float64(s.count)))
	}
	k := s.ncls
	total := s.Count()
	if total == 0 {
		return math.NaN()
	}
	tp := func(c int) int64 { return s.conf[c*k+c] }
	fp := func(c int) int64 {
		var v int64
		for t := range k {
			if t != c {
				v += s.conf[t*k+c]
			}
		}
		return v
	}
	fn := func(c int) int64 {
		var v int64
		for p := range k {
			if p != c {
				v += s.conf[c*k+p]
			}
		}
		return v
	}
	switch name {
	case "accuracy":
		var right int64
		for c := range k {
			right += tp(c)
		}
		return float64(right) / float64(total)
	case "miou":
		var sum float64
		var present int
		for c := range k {
			u := tp(c) + fp(c) + fn(c)
			if u == 0 {
				continue
			}
			sum += float64(tp(c)) / float64(u)
			present++
		}
		return sum / float64(present)
	case "f1":
		f1 := func(c int) float64 {
			d := 2*tp(c) + fp(c) + fn(c)
			if d == 0 {
				return math.NaN()
			}
			return float64(2*tp(c)) / float64(d)
		}
		if s.t.Kind == Binary || (s.t.Kind == Classes && s.k == 1) {
			if v := f1(1); !math.IsNaN(v) {
				return v
			}
			return 1 // no positive anywhere, none predicted: perfect
		}
		var sum float64
		var present int
		for c := range k {
			if v := f1(c); !math.IsNaN(v) {
				sum += v
				present++
			}
		}
		return sum / float64(present)
	}
	return math.NaN()
}
