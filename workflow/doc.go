// Package workflow is the one place where a command becomes a plan and
// the engine that runs it: it gathers the facts the planner is told (the
// host, the data's sample counts and resident bytes, the torch worker's
// probe), calls planner.Plan, and makes a run's two choices the planner
// cannot (decideRun): data parallelism over every local GPU, and a GPU
// found by device auto kept only when the torch engine starts. It sets up
// the engine a plan names (RunEngines, Engine, ServeWorkers) and settles
// what surrounds a run: its job and folder (JobOf, PlaceRun), the files
// it writes (PrepareOutputs, Finish), the checkpoint serve and export
// load, a plan file held against its source (Recheck), and step-time
// forecasts.
//
// pipe plan, run, serve and export (cmd/pipe) and the language server (by
// the planner cmd/pipe hands it) all plan through Workflow.Plan; a
// Purpose says which command asks, and so which facts are gathered and
// which choices are made, in one table (purpose.go).
//
// Neighbours: below it lang and stdlib (the checked and decoded program),
// planner (the plan), the engines, run and run/report, and dataset (its
// facts); above it cmd/pipe, which turns flags into a Request and renders
// what comes back. Nothing below imports it (TestImports). Package lsp
// does not import it either: it takes its planner as a function, so the
// editor's package links no engine.
package workflow
