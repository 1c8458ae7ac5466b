package editor

import (
	"bytes"
	"embed"
	"fmt"
	"path/filepath"
	"text/template"

	"pipe/lang"
)

//go:embed templates
var templates embed.FS

// Generated maps each generated file, by its path relative to the editor
// folder, to its content.
type Generated map[string][]byte

// Generate renders every generated editor file from the schema.
func Generate(s lang.Schema) (Generated, error) {
	w := Collect(s)
	out := Generated{}
	tm, err := TextMate(w)
	if err != nil {
		return nil, fmt.Errorf("textmate grammar: %w", err)
	}
	out[filepath.Join("vscode", "syntaxes", "pipe.tmLanguage.json")] = tm
	vim, err := Vim(w)
	if err != nil {
		return nil, fmt.Errorf("vim syntax: %w", err)
	}
	out[filepath.Join("vim", "syntax", "pipe.vim")] = vim
	return out, nil
}

// Vim renders the vim syntax file.
func Vim(w *Words) ([]byte, error) {
	t, err := template.ParseFS(templates, "templates/pipe.vim.tmpl")
	if err != nil {
		return nil, err
	}
	// Later syntax items win in vim, so the template lists the most
	// general first; the alternations need no order of their own there,
	// but are longest first all the same.
	data := map[string]string{}
	for name, list := range map[string][]string{
		"Blocks": w.Blocks, "Layers": w.Layers, "Families": w.Families, "Fields": w.Fields,
		"Args": w.Args, "Glued": w.Glued, "Values": w.Values, "Kinds": w.Kinds,
	} {
		data[name] = alternation(list, vimQuote)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
