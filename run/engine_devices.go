package run

import (
	"fmt"
	"strings"

	"pipe/planner/cost"
	"pipe/planner/plan"
)

// refused says why the engine named name cannot run plan p, whose device
// kind it does not compute on (its descriptor's traits, where the engine
// registered one), and where it can; "" when nothing is wrong. A plan
// file edited by hand is how such a plan reaches a run.
func refused(name string, p *plan.Plan) (summary, detail string) {
	var on []string
	var mine *cost.Traits
	for _, e := range cost.Registered() {
		t := e.Traits()
		if e.Name() == name {
			mine = &t
		} else if t.Runs(p.Backend) {
			on = append(on, "--engine "+e.Name())
		}
	}
	if mine == nil || mine.Runs(p.Backend) {
		return "", ""
	}
	var kinds []string
	for _, k := range mine.Devices {
		kinds = append(kinds, kindWords(k, "the"))
	}
	where, way := strings.Join(kinds, " and "), "another engine"
	if len(on) > 0 {
		way = strings.Join(on, " or ")
	}
	return fmt.Sprintf("the %s engine runs on %s only", name, where),
		fmt.Sprintf("This plan is for %s (%s) with the %s engine, which computes on %s. Re-plan with %s, or with --device cpu.",
			kindWords(p.Backend, "a"), p.Device.Name, name, where, way)
}

// kindWords names a device kind in a sentence: "the CPU", "a GPU".
func kindWords(kind, article string) string {
	if kind == plan.BackendCPU {
		return "the CPU"
	}
	return article + " " + strings.ToUpper(kind)
}
