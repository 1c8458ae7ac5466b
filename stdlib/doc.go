// Package stdlib is pipe's standard library as data: what each block,
// field, layer, model family, source, loss, optimizer, schedule, metric and
// device profile is. For every one it holds the arguments (with types,
// bounds, defaults and a line of documentation), and for layers and
// families the shape rule, parameter count, forward FLOPs and what the
// backward pass keeps.
//
// One registry feeds every consumer: the checker (package lang) resolves
// a file against Schema(), which implements lang.Schema; the planner reads
// a model's Graph (BuildGraph) and the device profiles (Devices) to choose
// a batch size and a precision; the editor's completion and the docs list
// Schema().Layers(), Blocks() and Ops(). Each primitive op is one
// descriptor (Op, ops.go) holding its docs, its layer calls with their
// build rules, and its named tensors with their initialisers, which
// package engine/weights draws. How an op is computed at run time lives in
// the engines; a new op is one descriptor here, plus its kernels there.
//
// stdlib imports only pipe/lang and pipe/lang/diag from the project, and,
// outside the standard library, the edit distance lang already uses for its
// "did you mean".
package stdlib
