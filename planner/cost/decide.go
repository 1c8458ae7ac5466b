package cost

import (
	"pipe/diag"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// Decider is a descriptor's optional facet: the engine's own settings
// (plan.Engine's and the data-parallel layout's), each with its reason,
// decided once the plan's precision, batch, checkpoint segments and
// step time are known. An engine without it has no settings to decide.
type Decider interface {
	Decide(s *Settings)
}

// Settings is what an engine's decisions read and where they go.
type Settings struct {
	// Plan is the plan so far; the engine fills Plan.Engine's settings
	// and Plan.Distributed.SyncBatchnorm.
	Plan  *plan.Plan
	Graph *stdlib.Graph
	// Memory is what the engine's cost model said of the graph (its
	// attention and conv paths and why).
	Memory Memory
	// SyncBatchnorm is train's sync_batchnorm ("auto", "true" or
	// "false") and At where it is written (nil where it is not).
	SyncBatchnorm string
	At            *diag.Range
	// AllReduce and AllReduceWhy are the all-reduce decision the
	// planner's network model makes for a data-parallel plan ("" for
	// one device), which the engine places among its own.
	AllReduce, AllReduceWhy string
	// GraphOff is why the engine's workers keep CUDA graphs off (the
	// host's switch, as GPUSetup.GraphOff), "" where the engine decides.
	GraphOff string
	// Decide records a decision; Warn a warning diagnostic.
	Decide func(what, value, why string)
	Warn   func(at *diag.Range, code, summary, detail string)
}
