package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"pipe/engine/costs"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/workflow"
)

// engineFlagSet holds the flags that choose the engine and the devices,
// shared by pipe plan and pipe run (torchrun's names for the devices).
type engineFlagSet struct {
	engine *string
	nproc  *int
	nnodes *int
	// network is --network, the bandwidth between machines.
	network *string
}

func engineFlags(fs *flag.FlagSet) *engineFlagSet {
	return &engineFlagSet{
		engine:  fs.String("engine", "", "the engine: "+engineChoices()+"; overrides the file's engine"),
		nproc:   fs.Int("nproc-per-node", 0, "data parallelism: devices on this machine, one worker each (torch engine; default: the GPUs present, 1 on the CPU)"),
		nnodes:  fs.Int("nnodes", 0, "data parallelism: machines taking part (default 1)"),
		network: fs.String("network", "", "data parallelism: the network between machines, for the step time's all-reduce (default 100Gb/s; NVLink on one machine of GPUs)"),
	}
}

// check says what is wrong with the flags, "" when nothing.
func (e *engineFlagSet) check() string {
	if *e.engine != "" && *e.engine != "auto" && !slices.Contains(engineNames(), *e.engine) {
		return fmt.Sprintf("--engine %s: give %s", *e.engine, orList(append([]string{"auto"}, engineNames()...)))
	}
	if *e.nproc < 0 || *e.nnodes < 0 {
		return "--nproc-per-node and --nnodes must not be negative"
	}
	if *e.network != "" {
		if _, err := planner.ParseBandwidth(*e.network); err != nil {
			return "--network " + err.Error()
		}
	}
	return ""
}

// request puts the flags into a planning request.
func (e *engineFlagSet) request(req *workflow.Request) {
	req.Engine, req.NProcPerNode, req.NNodes = *e.engine, *e.nproc, *e.nnodes
	if *e.network != "" {
		req.Network, _ = planner.ParseBandwidth(*e.network)
	}
}

// engineNames are the registered engines' names.
func engineNames() []string {
	var out []string
	for _, e := range costs.Engines() {
		out = append(out, e.Name())
	}
	return out
}

// engineChoices says what --engine takes: auto, with the engine it takes
// on each device kind, and the engines by name.
func engineChoices() string {
	var auto []string
	for _, kind := range []string{plan.BackendCPU, plan.BackendGPU} {
		for _, e := range costs.Engines() {
			if slices.Contains(e.Traits().Auto, kind) {
				auto = append(auto, e.Name()+" on "+map[string]string{plan.BackendCPU: "the CPU", plan.BackendGPU: "a GPU"}[kind])
			}
		}
	}
	return "auto (" + strings.Join(auto, ", ") + "), " + orList(engineNames())
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
