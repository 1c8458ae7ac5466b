package dataset

import (
	"fmt"
	"math"
	"math/rand/v2"

	"pipe/dataset/source"
	"pipe/spec"
)

// A synthetic source generates a task with a known answer, for trying
// models without data on disk. Samples are made on demand from (seed,
// index), so they cost no memory and are the same in every run.
//
// With classes K: Gaussian blobs. Each class k has a centre μ_k whose F =
// prod(shape) components are drawn N(0, 16/F) once from the seed; sample i
// gets a class drawn uniformly from (seed, i) and x = μ_k + ε, ε ~ N(0, I).
// Inputs thus have about unit variance per component, and two centres lie
// about 4√2 ≈ 5.7 noise standard deviations apart whatever F is, so the
// nearest-centre rule (Bayes-optimal here, and linear) errs on a pair with
// probability Φ(−2.83) ≈ 0.2%: about 98% accuracy for 10 classes. A linear
// model can get close to that and no model can do much better.
//
// Without classes: a linear teacher. x ~ N(0, I) and y = w·x + 0.1·ε with
// w ~ N(0, I/F) drawn once from the seed, so y has variance about 1 and
// the best achievable mean squared error is 0.01.

type syntheticDataset struct {
	n, f    int
	shape   []int64
	classes int
	seed    uint64
	centres []float32 // classes × f, or the teacher's w (f)
	noise   float64
}

func openSynthetic(b *spec.Source, c *config) (Dataset, error) {
	d := &syntheticDataset{}
	d.n = int(b.Synthetic.Samples)
	d.shape = append([]int64(nil), b.Synthetic.Shape...)
	d.classes = int(b.Synthetic.Classes)
	seed := c.seed
	if v := b.Synthetic.Seed; v != nil {
		seed = *v
	}
	d.seed = uint64(seed)
	d.f = prod(d.shape)
	if d.n < 1 || len(d.shape) == 0 || d.f < 1 {
		return nil, blockErr(b, "shape", fmt.Errorf("synthetic source %s: needs samples ≥ 1 and a non-empty shape", b.Name))
	}
	r := source.NewRNG(source.SaltSynth, d.seed)
	if d.classes > 0 {
		s := 4 / math.Sqrt(float64(d.f))
		d.centres = make([]float32, d.classes*d.f)
		for i := range d.centres {
			d.centres[i] = float32(s * r.Norm())
		}
		d.noise = 1
	} else {
		d.centres = make([]float32, d.f)
		s := 1 / math.Sqrt(float64(d.f))
		for i := range d.centres {
			d.centres[i] = float32(s * r.Norm())
		}
		d.noise = 0.1
	}
	return d, nil
}

func (d *syntheticDataset) Len() int        { return d.n }
func (d *syntheticDataset) XShape() []int64 { return append([]int64(nil), d.shape...) }
func (d *syntheticDataset) YShape() []int64 {
	if d.classes > 0 {
		return []int64{}
	}
	return []int64{1}
}
func (d *syntheticDataset) Classes() int  { return d.classes }
func (d *syntheticDataset) HasMask() bool { return false }
func (d *syntheticDataset) Close() error  { return nil }

// Centres returns the class centres (classes × F, row-major), or the
// teacher's weights (F) for a regression task: the answer the task hides.
func (d *syntheticDataset) Centres() []float32 { return append([]float32(nil), d.centres...) }

func (d *syntheticDataset) Read(i int, x, y, _ []float32) error {
	if i < 0 || i >= d.n {
		return fmt.Errorf("synthetic: sample %d out of range [0, %d)", i, d.n)
	}
	r := source.NewRNG(source.SaltSample, d.seed, uint64(i))
	x = x[:d.f]
	if d.classes > 0 {
		k := r.Intn(d.classes)
		mu := d.centres[k*d.f : (k+1)*d.f]
		for j := range x {
			x[j] = mu[j] + float32(d.noise*r.Norm())
		}
		y[0] = float32(k)
		return nil
	}
	var dot float64
	for j := range x {
		v := r.Norm()
		x[j] = float32(v)
		dot += float64(d.centres[j]) * v
	}
	y[0] = float32(dot + d.noise*r.Norm())
	return nil
}

// RandomBatch is n samples of random data for a model with the input and
// output shapes given (per sample): inputs from N(0, 1), targets suited to
// the loss (class indices, one per output position, for cross_entropy; 0
// or 1 per output element for bce and dice; N(0, 1) otherwise), the same
// for the same seed. Benchmarks and engine checks train on it where the
// data's values do not matter.
func RandomBatch(input, output []int64, loss string, n int, seed uint64) *Batch {
	r := rand.New(rand.NewPCG(seed, 0x70697065))
	numel := func(s []int64) int {
		p := 1
		for _, d := range s {
			p *= int(d)
		}
		return p
	}
	b := &Batch{N: n, X: make([]float32, n*numel(input))}
	for i := range b.X {
		b.X[i] = float32(r.NormFloat64())
	}
	switch loss {
	case "cross_entropy":
		classes := 1
		if len(output) > 0 {
			classes = int(output[0])
		}
		b.Y = make([]float32, n*numel(output[min(1, len(output)):]))
		for i := range b.Y {
			b.Y[i] = float32(r.IntN(max(classes, 1)))
		}
	case "bce", "dice":
		b.Y = make([]float32, n*numel(output))
		for i := range b.Y {
			b.Y[i] = float32(r.IntN(2))
		}
	default:
		b.Y = make([]float32, n*numel(output))
		for i := range b.Y {
			b.Y[i] = float32(r.NormFloat64())
		}
	}
	return b
}
