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
// admitted than it holds (others are being read or queued): a request
// that arrives alone runs at once, so batching costs nothing at low load. A request is read whole before it queues, so
// a slow client holds its connection and never a worker.
//
// Bounds: at most Queue requests are admitted at once (being read,
// waiting or running); the next gets 503 with Retry-After. A body larger
// than MaxBody gets 413, a request of more than MaxBatch samples 413.
package serve
