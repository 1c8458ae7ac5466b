// Package lsp is pipe's language server: `pipe lsp` serves it over standard
// input and output to an editor (the VS Code extension in editor/vscode, or
// any LSP client).
//
// It speaks the protocol through go.lsp.dev/jsonrpc2 and go.lsp.dev/protocol,
// with a framing (stream.go) that answers a malformed or oversized message
// without dropping the connection. It publishes the checker's diagnostics,
// then the planner's, on open and on change (debounced), formats with
// package format, completes from the stdlib registry, and on hover shows a
// layer's shape, parameters and memory, or any other word's documentation.
// The planner is passed in by cmd/pipe (WithPlanner), so this package links
// neither the planner nor an engine. Positions: package diag counts bytes,
// the protocol UTF-16 code units; text.go converts.
// The long form: docs/design/lsp.md.
package lsp
