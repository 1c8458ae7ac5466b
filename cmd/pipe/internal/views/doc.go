// Package views renders what the pipe command shows: plans, devices, a
// run's end, an export and a serving model as text, as Terraform's
// command views do. It decides nothing: the plan's choices, each with its
// Reason, are the planner's; the device's fallback, the run's folder and
// the files it writes are workflow's; views only lays them out.
//
// Neighbours: cmd/pipe parses the flags and calls workflow, then hands the
// results here; lang/render renders diagnostics; run/report renders a
// run's summary and profile table.
package views
