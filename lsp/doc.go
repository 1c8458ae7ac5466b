// Package lsp is pipe's language server: `pipe lsp` serves it over standard
// input and output to an editor (the VS Code extension in editor/vscode, or
// any LSP client).
//
// It speaks the protocol through go.lsp.dev/jsonrpc2 and the types of
// go.lsp.dev/protocol, with a framing (stream.go) that answers a malformed
// message with a JSON-RPC error instead of dropping the connection, and a
// document too large to read with a diagnostic on it and a message to the
// user (a document larger than a pipe file may be, but readable, is held
// and refused with the parser's diagnostic until it shrinks). It
// publishes the checker's diagnostics, then the planner's, on open and on
// change (debounced; each change cancels the analysis before it), formats
// with package format, completes from the stdlib registry by where the
// cursor stands, and on hover shows a layer's output shape, parameters and
// activation memory, and what any other word is: a field's, argument's or
// value's documentation, a size in bytes or pixels, a device's profile.
//
// Neighbours: package lang parses and checks; package stdlib is the
// registry and builds the graphs that give shapes when there is no plan;
// the planner is passed in by cmd/pipe (WithPlanner), which plans through
// package workflow as every command does, so this package links neither
// the planner nor an engine; package format formats. Positions: package
// diag counts bytes, the protocol counts UTF-16 code units; text.go
// converts.
package lsp
