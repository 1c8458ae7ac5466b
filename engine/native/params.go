package native

import (
	"hash/fnv"
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"
)

// param is a named tensor of the model: a trainable parameter (with its
// gradient and optimizer state) or a buffer (batchnorm's running
// statistics). All of them are views into flat arrays allocated once, so
// the optimizer, ZeroGrad and the gradient norm are single loops.
type param struct {
	name  string
	shape []int64
	n     int
	init  func(r *rand.Rand, x []float32)
	// t is the gorgonia/tensor view of data, for callers that want one.
	t      *tensor.Dense
	data   []float32
	grad   []float32
	m1, m2 []float32
	off    int
}

// flatState holds the flat arrays.
type flatState struct {
	params, grads, m1, m2 []float32
	buffers               []float32
}

// newParam registers a trainable parameter; its memory is assigned by
// allocParams once every kernel is built.
func (m *model) newParam(name string, shape []int64, init func(r *rand.Rand, x []float32)) *param {
	p := &param{name: name, shape: shape, n: numel(shape), init: init}
	m.params = append(m.params, p)
	return p
}

// newBuffer registers a non-trainable tensor (running statistics).
func (m *model) newBuffer(name string, shape []int64, init func(r *rand.Rand, x []float32)) *param {
	p := &param{name: name, shape: shape, n: numel(shape), init: init}
	m.buffers = append(m.buffers, p)
	return p
}

func numel(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// allocParams lays the parameters out in the flat arrays and initialises
// them. Each tensor draws from its own stream, seeded by the model's seed
// and the tensor's name, so adding a layer leaves the others' initial
// values unchanged.
func (m *model) allocParams(states int) {
	total := 0
	for _, p := range m.params {
		p.off = total
		total += p.n
	}
	f := &m.flat
	f.params = make([]float32, total)
	f.grads = make([]float32, total)
	if states >= 1 {
		f.m1 = make([]float32, total)
	}
	if states >= 2 {
		f.m2 = make([]float32, total)
	}
	for _, p := range m.params {
		p.data = f.params[p.off : p.off+p.n : p.off+p.n]
		p.grad = f.grads[p.off : p.off+p.n : p.off+p.n]
		if f.m1 != nil {
			p.m1 = f.m1[p.off : p.off+p.n : p.off+p.n]
		}
		if f.m2 != nil {
			p.m2 = f.m2[p.off : p.off+p.n : p.off+p.n]
		}
	}
	total = 0
	for _, p := range m.buffers {
		p.off = total
		total += p.n
	}
	f.buffers = make([]float32, total)
	for _, p := range m.buffers {
		p.data = f.buffers[p.off : p.off+p.n : p.off+p.n]
	}
	for _, p := range append(append([]*param(nil), m.params...), m.buffers...) {
		p.t = tensor.New(tensor.WithBacking(p.data), tensor.WithShape(intShape(p.shape)...))
		if p.init != nil {
			p.init(m.rng(p.name), p.data)
		}
	}
}

func intShape(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	if len(out) == 0 {
		out = []int{1}
	}
	return out
}

// rng returns the random stream for a named tensor.
func (m *model) rng(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(m.cfg.Seed, h.Sum64()))
}

// uniform fills x from U(-bound, bound).
func uniform(bound float64) func(r *rand.Rand, x []float32) {
	return func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32((2*r.Float64() - 1) * bound)
		}
	}
}

// kaiming is PyTorch's default for Linear and Conv2d weights:
// kaiming_uniform_(a=√5), which is U(-1/√fan_in, 1/√fan_in); their biases
// use the same bound.
func kaiming(fanIn int) func(r *rand.Rand, x []float32) {
	return uniform(1 / math.Sqrt(float64(fanIn)))
}

func fill(v float32) func(r *rand.Rand, x []float32) {
	return func(_ *rand.Rand, x []float32) {
		for i := range x {
			x[i] = v
		}
	}
}
