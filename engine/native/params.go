package native

import (
	"fmt"
	"slices"

	"gorgonia.org/tensor"

	"pipe/engine/weights"
)

// param is a named tensor of the model: a trainable parameter (with its
// gradient and optimizer state) or a buffer (batchnorm's running
// statistics). All of them are views into flat arrays allocated once, so
// the optimizer, ZeroGrad and the gradient norm are single loops.
type param struct {
	name  string
	shape []int64
	n     int
	decl  weights.Tensor
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
// allocParams once every kernel is built. Its shape and initial values
// are package weights' declaration of it, which the kernel's shape must
// match: a mismatch is this engine's bug, reported as engine.ErrInternal.
func (m *model) newParam(name string, shape []int64) *param {
	p := m.declared(name, shape, false)
	m.params = append(m.params, p)
	return p
}

// newBuffer registers a non-trainable tensor (running statistics, fixed
// sketches).
func (m *model) newBuffer(name string, shape []int64) *param {
	p := m.declared(name, shape, true)
	m.buffers = append(m.buffers, p)
	return p
}

func (m *model) declared(name string, shape []int64, buffer bool) *param {
	if m.decls == nil { // the cost model's probe: it prices, allocating and drawing nothing
		return &param{name: name, shape: shape, n: numel(shape)}
	}
	d, ok := m.decls[name]
	if !ok || !slices.Equal(d.Shape, shape) || d.Buffer != buffer {
		panic(fmt.Errorf("the kernel's tensor %s %v (buffer %t) is not package weights' %v (buffer %t, declared %t)",
			name, shape, buffer, d.Shape, d.Buffer, ok))
	}
	return &param{name: name, shape: shape, n: numel(shape), decl: d}
}

func numel(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// allocParams lays the parameters out in the flat arrays and initialises
// them as package weights draws them under the model's seed.
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
		p.decl.Fill(m.cfg.Seed, p.data)
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
