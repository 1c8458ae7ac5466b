// Package run executes a plan: it builds the model on an engine
// (engine.Backend), feeds it the batches of package dataset, and trains,
// evaluates, predicts and checkpoints, then assembles what happened into
// a Result. It is the last of pipe's four stages (lang.Parse → lang.Check
// → planner.Plan → run.Run).
//
// It decides nothing the plan already decided: the batch, the precision,
// the checkpoint segments and the fusion groups come from the plan, and
// reach the engine through engine.Config (ConfigFromPlan). Its
// neighbours: engine (the contract it drives), dataset (the sources),
// planner/plan (what it executes), run/report (the report it writes),
// run/folder (the run folder's files and the rules that keep runs apart).
package run
