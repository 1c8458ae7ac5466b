// Package enginetest provides a fake engine.Backend for testing the executor's
// orchestration (run.Run, the command line) without the cost of a real
// backend: every graph becomes one linear map from the flattened input to
// the flattened output, trained in plain Go with the real losses and
// optimizers' update rules. It honours everything engine.Model promises that
// the orchestration relies on: micro-batch accumulation with a scale,
// deterministic initialisation from Config.Seed, a random stream keyed by
// the micro-step counter (standing in for dropout), exact State and
// SetState, non-finite losses reported as *engine.NonFiniteError, and masks.
//
// It imports engine; run's own tests and cmd/pipe's use it.
package enginetest
