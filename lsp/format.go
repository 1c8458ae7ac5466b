package lsp

import (
	"unicode/utf8"

	"go.lsp.dev/protocol"

	"pipe/lang/format"
)

// formatEdits formats text with the canonical formatter and returns one
// edit covering only the part that changed, so the editor keeps the cursor
// and the undo history tidy. A text that does not parse is left alone: the
// formatter refuses it, and its diagnostics are already shown.
func formatEdits(text string) ([]protocol.TextEdit, error) {
	out, err := format.Source([]byte(text))
	if err != nil {
		return []protocol.TextEdit{}, nil
	}
	formatted := string(out)
	if formatted == text {
		return []protocol.TextEdit{}, nil
	}
	p := commonPrefix(text, formatted)
	s := commonSuffix(text[p:], formatted[p:])
	m := newMapper(text)
	return []protocol.TextEdit{{
		Range:   m.byteRange(p, len(text)-s),
		NewText: formatted[p : len(formatted)-s],
	}}, nil
}

// commonPrefix returns the length of the longest common prefix of a and b
// that ends on a character boundary in both.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[n]) {
		n--
	}
	return n
}

// commonSuffix is commonPrefix from the end.
func commonSuffix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[len(a)-n]) {
		n--
	}
	return n
}
