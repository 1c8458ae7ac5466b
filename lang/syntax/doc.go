// Package syntax lexes and parses .pipe files with participle. Its
// grammar (grammar.go, one struct per production) is a deliberate
// superset: a statement is any run of words with an optional body, so
// that the checker (package lang) can reject a mistake with the precise
// reason. Parse lowers the grammar's structs, which never leave this
// package, into package ast's tree; it recovers at the next top-level
// statement after an error, and turns participle's errors into
// diagnostics in one place (syntaxError). Tokens gives the token stream
// the formatter and the language server read, Rules the lexer's rules the
// editor's grammars are made from, and EBNF the grammar, kept as a golden
// file.
package syntax
