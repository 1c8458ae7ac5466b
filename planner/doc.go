// Package planner is the third stage of pipe: lang.Parse → lang.Check →
// stdlib.Decode → planner.Plan → run.Run. It takes the decoded program
// (stdlib.Program: the typed specs and the models' graphs) and decides,
// before any compute, how it trains on a device and what that costs: the
// device and the precision that runs, a memory model per engine
// (memory.go, memory_cpu.go), the batch and the gradient-checkpoint
// segments, solved together (batch.go, checkpoint.go), accumulation, the
// learning rate's scaling and warm-up, fusion groups, the loader's workers
// and prefetch, and a roofline estimate of a step's time.
//
// Every automatic choice is a plan.Decision with a one-sentence reason.
// The result is a *plan.Plan: plain, versioned JSON data with the sha256
// of its source, which the executor runs without deciding anything again.
// A context given with WithContext stops planning wherever it is.
//
// Neighbours: planner reads spec (the decoded settings, with spec.Auto for
// auto values and spec.Where for diagnostics) and stdlib (the graph with
// shapes and costs, the device profiles); it imports no package under
// lang (TestPlannerReadsNoSyntax), never an engine or the run loop.
// The long form: docs/design/planner.md.
package planner
