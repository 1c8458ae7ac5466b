// Package costs links in every engine, each of which registers its
// descriptor (cost.Register) as it starts: the callers of planner.Plan
// hand them in with planner.WithCosts. The planner imports no engine, and
// this is the one place that names them all.
package costs

import (
	_ "pipe/engine/native" // registers the native engine
	_ "pipe/engine/torch"  // registers the torch engine
	"pipe/planner/cost"
)

// Engines returns every engine's descriptor, by name.
func Engines() []cost.Engine { return cost.Registered() }
