// Package editor generates pipe's editor support from the stdlib registry:
// the TextMate grammar of the VS Code extension (editor/vscode) and the vim
// syntax file (editor/vim). Their keyword, field, layer, argument and value
// lists come from the registry, so a layer added to stdlib is highlighted
// after `go generate ./editor`; TestGeneratedFilesAreCurrent (in gen,
// which links the engines in for their names) fails while the files on
// disk lag behind.
//
// Neighbours: stdlib supplies the names (through lang.Schema); the
// language server (package lsp) completes from the same registry at run
// time. The grammar's token patterns mirror the lexer's rules in
// lang/syntax, and the grammar tests under editor/vscode/test cover every
// token class.
package editor

//go:generate go run ./gen
