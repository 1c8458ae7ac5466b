// Package serve is pipe serve's HTTP server: a trained model
// (run.Trained, one per worker) behind POST /v1/predict, with dynamic
// batching, health and readiness, Prometheus metrics, bounded memory and a
// draining shutdown. It takes its sizes from the plan's serving section
// (plan.Serve, decided by the planner); cmd/pipe wires it to the command
// line, and bench/cmd/load drives it.
//
// How it batches, what bounds it and how it treats a lost worker:
// docs/design/serving.md.
package serve
