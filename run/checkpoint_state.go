package run

import (
	"time"

	"pipe/engine"
)

// ReadCheckpointState reads and verifies a checkpoint file written by
// Run and returns the model's state it holds (in gan mode both models',
// the discriminator's under "discriminator."): for tools and tests that
// compare what two runs trained.
func ReadCheckpointState(path string) (engine.State, error) {
	_, st, err := readCheckpoint(path)
	return st, err
}

// CheckpointInfo is what a checkpoint file says of the run that wrote
// it, read without its tensors: enough to choose among runs.
type CheckpointInfo struct {
	Pipeline, Model string
	// Structure fingerprints the model's graph ("" in files written
	// before it was kept): two files of one structure fit one model.
	Structure string
	// Position is where training stood, Epochs the file's epochs.
	Position Position
	Epochs   int
	// StepLimit is the --max-steps that stopped the run short of the
	// file's steps, 0 when none did.
	StepLimit int64
	Written   time.Time
}

// ReadCheckpointInfo reads a checkpoint's metadata (not its tensors, so
// the checksum is not verified: loading the file does that).
func ReadCheckpointInfo(path string) (CheckpointInfo, error) {
	m, err := readCheckpointMeta(path)
	if err != nil {
		return CheckpointInfo{}, err
	}
	return CheckpointInfo{Pipeline: m.Pipeline, Model: m.Model, Structure: m.Structure, Position: m.Position,
		Epochs: m.Epochs, StepLimit: m.StepLimit, Written: m.Written}, nil
}
