// Package stdlib is pipe's standard library as data: what each block,
// field, layer, model family, source, loss, optimizer, schedule, metric and
// device profile is, with its arguments, and for layers and families the
// shape rule, parameter count, forward FLOPs and what the backward keeps.
//
// One registry feeds every consumer: the checker (Schema implements
// lang.Schema), the planner (BuildGraph, Devices), the editor's completion
// and the docs. Each primitive op is one descriptor (Op, ops.go); how it is
// computed lives in the engines, so a new op is one descriptor here plus
// its kernels there. Decode turns a checked program into the typed specs
// of package spec, once, so that the planner, the run loop and the data
// readers never read the syntax tree. stdlib imports only pipe/lang,
// pipe/diag and pipe/spec from the project (TestImports). The long form:
// docs/design/stdlib.md.
package stdlib
