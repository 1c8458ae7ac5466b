// Package workflow is the one place where a command becomes a plan and an
// engine: it gathers the facts the planner is told (the host, the data's
// sample counts and resident bytes, the torch engine's probe), decides
// the device and the engine where the file leaves them to pipe, calls
// planner.Plan, and sets up the engine a plan runs on.
//
// pipe plan, run, serve and export (cmd/pipe) and the language server (by
// the planner cmd/pipe hands it) all plan through Workflow.Plan; a
// Purpose says which command asks, and so which facts are gathered and
// which choices are made, in one table (purpose.go).
//
// Neighbours: below it lang (the checked program), planner (the plan),
// exec and its engines and data (facts and engines); above it cmd/pipe,
// which turns flags into a Request and renders what comes back. Nothing
// below imports it. Package lsp does not import it either: it takes its
// planner as a function, so the editor's package links no engine.
package workflow
