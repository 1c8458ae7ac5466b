// Package bench holds the seed configurations of pipe as .pipe files (the
// models the performance guides pipe was conceived from measured on an
// A100 80GB) and the tests and benchmarks that put the planner's figures
// beside theirs:
//
//	go test ./bench -run SeedFigures -v     estimates beside the published peaks
//	go test ./bench -run NONE -bench .      BenchmarkPlan200Layers
//
// The commands under bench/cmd measure speed, as ratios taken back to back
// in one run, never as timed tests (make bench runs them): ratios, pipe's
// training step beside PyTorch's on bench/models (an MLP, the
// Fashion-MNIST CNN, a small U-Net), and the torch engine's overhead
// against a plain PyTorch loop in the engine's own worker; tiles, GeoTIFF
// tiles per second against raw GDAL window reads (bench/tiles.json); int8,
// int8 inference against fp32; infer, pipe's CPU inference beside
// onnxruntime's on the same exported model (bench/infer.json). Their
// methods: docs/design/bench-*.md and the commands' doc comments.
package bench
