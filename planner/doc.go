// Package planner is the third stage of pipe: lang.Parse → lang.Check →
// planner.Plan → exec.Run. It takes a checked program and decides, before
// any compute, how it trains on a device and what that costs:
//
//   - the device: the local CPU or GPU (HostInfo, measured by DetectHost or
//     injected with WithHost), a built-in profile (stdlib.Devices) or a
//     device block of the file, with a "did you mean" for unknown names;
//   - the precision that runs (fallbacks are warnings at the precision line);
//   - a memory model per backend: on a GPU (memory.go) parameters,
//     gradients, optimizer state, master weights, activations saved for the
//     backward pass per layer, the largest op's workspace and the input
//     batch; on the CPU (memory_cpu.go) what pipe's executor allocates, its
//     training step laid out by the engine's own cost model (activations and
//     their gradients, per-thread scratch, the evaluation arena) and the
//     loaders' buffers;
//   - the batch and the gradient-checkpoint segments, solved together
//     (batch.go), the segments by an optimal dynamic programme over the
//     graph (checkpoint.go);
//   - accumulation to reach effective_batch exactly, the learning rate
//     scaled to the batch that runs, warm-up;
//   - fusion groups, the loader's workers and prefetch, and a roofline
//     estimate of a step's time.
//
// Every automatic choice is a plan.Decision with a one-sentence reason. The
// result is a *plan.Plan: plain data in package plan, versioned JSON with
// the sha256 of its source, which `pipe plan --out` writes and the executor
// runs without deciding anything again (Load, then Verify against the
// source).
//
// Planning is linear in the graph's length but for the checkpoint
// programme, which is exact up to 1023 nodes and holds longer graphs to
// about 1024 cut points (checkpoint.go), and a context given with
// WithContext stops it wherever it is: the language server plans on every
// edit and cancels the analysis of the version before.
//
// Neighbours: planner reads lang (the checked Program) and stdlib (the
// graph with shapes and costs, the device profiles); it never imports the
// executor. Package plan imports nothing of pipe, so the executor can read
// a plan without the planner. The command line (cmd/pipe plan, devices)
// renders what this package returns.
package planner
