// Package views renders what the pipe command shows: plans, devices, a
// run's end and an export as text, as Terraform's command views do. It
// decides nothing; package workflow made every choice it shows.
//
// Neighbours: cmd/pipe parses the flags and calls workflow, then hands the
// results here; lang/render renders diagnostics; run/report renders a
// run's summary and profile table.
package views
