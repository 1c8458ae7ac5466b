// Package lang gives a parsed .pipe file its meaning. Parse (package
// syntax underneath) gives a syntax tree; Check looks every block, field,
// layer and argument up in a Schema, types and bounds the values, resolves
// names and checks each model's shapes, and returns a Program with a
// Range on every part and a diagnostic for everything that did not check.
// Decode fills a tagged struct from a checked block, as HCL's gohcl does.
// Beside them: --set overrides applied to the source (override.go), a
// sweep block's parameters (sweep.go), a gan-mode train block (gan.go) and
// the one "did you mean" (Nearest).
//
// lang knows only participle, the edit distance and the standard library:
// stdlib implements Schema, so the language never imports what runs it.
// Its neighbours below are syntax, ast and diag; above it stdlib decodes
// a Program into specs, and the planner, the language server and
// cmd/pipe read it. format and render sit beside it. The language itself:
// docs/language.md.
package lang
