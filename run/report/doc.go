// Package report shows and records what run.Run did: a progress display
// built from run.Hooks (a progress bar on a terminal, log lines
// otherwise), the run report as JSON (Report, with the plan's estimate
// beside the measured memory and throughput), the loss curve as a PNG
// (gonum.org/v1/plot), the profile table of pipe run --profile, and the
// short summary pipe run prints at the end.
//
// It reads run's Result and Profile and the plan; run does not import it.
// workflow writes the report and the curve (Finish); cmd/pipe wires the
// progress display to a run and prints the summary and the table.
package report
