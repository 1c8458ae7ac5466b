// Package bench holds the seed configurations of pipe as .pipe files (the
// models the performance guides pipe was conceived from measured on an
// A100 80GB) and the tests and benchmarks that put the planner's figures
// beside theirs:
//
//	go test ./bench -run SeedFigures -v     estimates beside the published peaks
//	go test ./bench -run NONE -bench .      BenchmarkPlan200Layers
//
// Speed is measured here, as benchmarks, never as timed tests.
package bench
