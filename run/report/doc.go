// Package report shows and records what run.Run did: a progress display
// built from run.Hooks (a progress bar on a terminal, log lines
// otherwise), the run report as JSON (Report, with the plan's estimate
// beside the measured memory and throughput), the loss curve as a PNG
// (gonum.org/v1/plot), and the short summary pipe run prints at the end.
//
// It reads exec's Result and the plan; exec does not import it. The
// command line (cmd/pipe) wires it to Run.
package report
