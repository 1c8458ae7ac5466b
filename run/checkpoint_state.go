package run

import "pipe/engine"

// ReadCheckpointState reads and verifies a checkpoint file written by
// Run and returns the model's state it holds (in gan mode both models',
// the discriminator's under "discriminator."): for tools and tests that
// compare what two runs trained.
func ReadCheckpointState(path string) (engine.State, error) {
	_, st, err := readCheckpoint(path)
	return st, err
}
