// Package serve is pipe serve's HTTP server: a trained model
// (run.Trained, one per worker) behind POST /v1/predict, with dynamic
// batching, health and readiness, Prometheus metrics, bounded memory and a
// draining shutdown. It takes its sizes from the plan's serving section
// (plan.Serve, decided by the planner); cmd/pipe wires it to the command
// line, and bench/cmd/load drives it.
//
// Batching: each worker takes the first waiting request, then gathers
// more until its batch holds MaxBatch samples or MaxWait has passed since
// it took the first, runs them through the model as one batch, and hands
// each request its outputs. It waits only while more requests are
// admitted than it holds (others are queued or about to be): a request
// that arrives alone runs at once, so batching costs nothing at low load.
//
// Bounds: a request's body is read whole before it is admitted, so a slow
// client holds its connection and never a queue slot or a worker. At most
// MaxConns connections are open at once; past that a new one waits to be
// accepted. At most Queue requests are admitted at once (waiting or
// running); the next gets 503 with Retry-After. A body larger than
// MaxBody gets 413, one that has not arrived within Timeout 408, a
// request of more than MaxBatch samples 413.
//
// A lost worker (its model fails with an error matching
// engine.ErrWorkerLost, or its Liveness facet says its process died) is
// logged and rebuilt with back-off and the weights it had (WithRebuild);
// meanwhile /readyz answers 503 and the requests it cannot run 503 with
// Retry-After. Readiness returns once the rebuilt worker answers.
package serve
