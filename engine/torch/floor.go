package torch

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"pipe/planner/cost"
)

// The torch engine's host floor (cost.Floorer): what its host spends on a
// training step whatever the device's work, a step and a command, per
// device kind. The figures are data with their source, host_floor.json,
// which TestHostFloorIsItsSources derives again from the measurements it
// names (bench/protocol.json on the CPU, make gpu-smoke's JSONs on a
// GPU). Method: docs/design/torch-protocol.md.

//go:embed host_floor.json
var hostFloorJSON []byte

// floorEntry is one device kind's floor as host_floor.json holds it.
type floorEntry struct {
	StepSeconds    float64 `json:"step_seconds"`
	CommandSeconds float64 `json:"command_seconds"`
	Overlaps       bool    `json:"overlaps"`
	Source         string  `json:"source"`
}

// hostFloors is host_floor.json by device kind.
var hostFloors = func() map[string]floorEntry {
	var m map[string]floorEntry
	if err := json.Unmarshal(hostFloorJSON, &m); err != nil {
		panic(fmt.Sprintf("torch: host_floor.json: %v", err)) // package data, checked by its test
	}
	return m
}()

var _ cost.Floorer = Cost{}

// HostFloor implements cost.Floorer.
func (Cost) HostFloor(device string) cost.HostFloor {
	e, ok := hostFloors[device]
	if !ok {
		return cost.HostFloor{}
	}
	return cost.HostFloor{StepSeconds: e.StepSeconds, CommandSeconds: e.CommandSeconds, Overlaps: e.Overlaps, Source: e.Source}
}
