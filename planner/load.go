package planner

import "pipe/planner/plan"

// Load reads a plan file written by `pipe plan --out` and checks its
// version; the executor then calls Verify with the source before it runs
// the plan. It is plan.Load, here so that callers of the planner need no
// second import.
func Load(path string) (*plan.Plan, error) { return plan.Load(path) }
