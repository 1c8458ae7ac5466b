package main

import (
	"flag"
	"fmt"

	"pipe/planner"
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
		engine:  fs.String("engine", "", "the engine: auto (native on the CPU, torch on a GPU), native or torch; overrides the file's engine"),
		nproc:   fs.Int("nproc-per-node", 0, "data parallelism: devices on this machine, one worker each (torch engine; default: the GPUs present, 1 on the CPU)"),
		nnodes:  fs.Int("nnodes", 0, "data parallelism: machines taking part (default 1)"),
		network: fs.String("network", "", "data parallelism: the network between machines, for the step time's all-reduce (default 100Gb/s; NVLink on one machine of GPUs)"),
	}
}

// check says what is wrong with the flags, "" when nothing.
func (e *engineFlagSet) check() string {
	switch *e.engine {
	case "", "auto", "native", "torch":
	default:
		return fmt.Sprintf("--engine %s: give auto, native or torch", *e.engine)
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
