// Package bench holds the seed configurations of pipe as .pipe files (the
// models the performance guides pipe was conceived from measured on an
// A100 80GB) and the tests and benchmarks that put the planner's figures
// beside theirs:
//
//	go test ./bench -run SeedFigures -v     estimates beside the published peaks
//	go test ./bench -run NONE -bench .      BenchmarkPlan200Layers
//
// bench/models holds the models pipe's CPU training step is compared on
// with PyTorch's (an MLP, the Fashion-MNIST CNN, a small U-Net), and
// bench/cmd/ratios runs the comparison: the same models, built for
// PyTorch from a spec pipe writes (bench/torchspec, bench/torch_step.py),
// timed interleaved on the same machine in one run, reported as the ratio
// pipe/PyTorch per model (make bench runs both). The same run times pipe's
// torch engine (exec/torch) against a plain PyTorch loop on the engine's
// own network inside the engine's worker, so that the ratio between them
// is the engine's overhead alone.
//
// bench/cmd/tiles measures GeoTIFF tiles per second: the geotiff source
// through the loader against raw GDAL window reads of the same tiles
// (uncompressed, DEFLATE and ZSTD, tiled COG and striped, 1, 2 and all
// workers), and gdal_translate -srcwin as a reference (bench/tiles.json).
//
// Speed is measured here, as benchmarks and ratios, never as timed tests.
package bench
