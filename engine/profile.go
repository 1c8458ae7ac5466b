package engine

import "time"

// Profiler is the Capabilities facet of a Model that times its kernels by
// the clock. Run uses it under WithProfile; an engine without it cannot
// profile, and Run says so before it trains.
type Profiler interface {
	// EnableProfile turns timing on or off. Off, which is how a model
	// starts, it reads no clock and records nothing.
	EnableProfile(on bool)
	// Profile returns the spans timed since the last call, in the order
	// they ran, and forgets them.
	Profile() []Span
}

// Phase is what a span computed.
type Phase string

// Phases.
const (
	PhaseForward   Phase = "forward"   // a kernel's forward pass (in training or evaluation)
	PhaseBackward  Phase = "backward"  // its backward pass
	PhaseRecompute Phase = "recompute" // its forward again, in the backward pass of a checkpoint segment
	PhaseLoss      Phase = "loss"      // the loss and its gradient
)

// Span is one kernel's one pass, timed by the clock.
type Span struct {
	// Nodes are the graph nodes the kernel computed, in order: one node,
	// or the nodes of a fusion group; nil for the loss. Spans of one
	// kernel may share the slice: it must not be changed.
	Nodes []string
	Phase Phase
	// Start is when it began (time.Now, with its monotonic reading) and
	// Dur how long it took.
	Start time.Time
	Dur   time.Duration
}

// SpanLog is an engine's profiling state: the spans kept since Profile last
// took them, and the graph nodes each of its kernels' spans name.
type SpanLog struct {
	Spans []Span
	Names [][]string
}

// Take returns the spans kept and forgets them, as Profile does.
func (l *SpanLog) Take() []Span {
	out := append([]Span(nil), l.Spans...)
	l.Spans = l.Spans[:0]
	return out
}
