// Package format is the canonical formatter of .pipe files, the engine behind
// `pipe fmt` and the editor's "format document".
//
// It works on the token stream of package syntax (syntax.Tokens), as HCL's
// hclwrite does, not on the syntax tree: every comment is kept where it was,
// and only whitespace changes (spaces, tabs, newlines; a leading byte order
// mark is dropped and CRLF becomes LF). The result is idempotent:
// Source(Source(x)) == Source(x). A file that does not parse cleanly is not
// formatted; Source returns the parser's diagnostics (diag.Diagnostics,
// reachable with errors.As) instead.
//
// Neighbours: package syntax supplies the tokens and the parse that gates
// formatting; package diag carries the errors; cmd/pipe (fmt, fmt --check)
// and the language server call Source. The files under examples/ are fixed
// points of Source, and the tests keep them so: the formatter defines the
// canonical style.
package format
