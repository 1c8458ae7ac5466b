// Package costs gathers the engines' cost models, which the callers of
// planner.Plan hand in with planner.WithCosts: the planner imports no
// engine, and this is the one place that names them all.
package costs

import (
	"pipe/engine/native"
	"pipe/engine/torch"
	"pipe/planner/cost"
)

// Engines returns every engine's cost model.
func Engines() []cost.Engine {
	return []cost.Engine{native.Cost{}, torch.Cost{}}
}
