package lsp

import (
	"sort"
	"unicode/utf16"
	"unicode/utf8"

	"go.lsp.dev/protocol"

	"pipe/diag"
)

// LSP positions count UTF-16 code units within a line; package diag counts
// bytes (Pos.Byte is the 0-based offset in the file, Pos.Column the 1-based
// byte column). A mapper converts between the two for one text. Lines end
// at "\n", "\r\n" or a lone "\r", as the protocol defines them.
type mapper struct {
	text  string
	lines []int // byte offset of the start of each line
}

func newMapper(text string) *mapper {
	m := &mapper{text: text, lines: []int{0}}
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\n':
			m.lines = append(m.lines, i+1)
		case '\r':
			if i+1 < len(text) && text[i+1] == '\n' {
				i++
			}
			m.lines = append(m.lines, i+1)
		}
	}
	return m
}

// lineEnd returns the offset of the end of line l, before its terminator.
func (m *mapper) lineEnd(l int) int {
	if l+1 >= len(m.lines) {
		return len(m.text)
	}
	end := m.lines[l+1] - 1
	if m.text[end] == '\n' && end > m.lines[l] && m.text[end-1] == '\r' {
		end--
	}
	return end
}

// position converts a byte offset into an LSP position. An offset inside
// a multi-byte character counts from that character's start; an offset
// past the end is the end.
func (m *mapper) position(off int) protocol.Position {
	off = max(0, min(off, len(m.text)))
	l := sort.Search(len(m.lines), func(i int) bool { return m.lines[i] > off }) - 1
	end := min(off, m.lineEnd(l))
	var units uint32
	for i := m.lines[l]; i < end; {
		r, n := utf8.DecodeRuneInString(m.text[i:])
		if i+n > end {
			break
		}
		units += uint32(utf16.RuneLen(r)) // DecodeRune yields U+FFFD (one unit) for a bad byte
		i += n
	}
	return protocol.Position{Line: uint32(l), Character: units}
}

// offset converts an LSP position into a byte offset. A line past the last
// is the end of the text; a character past the end of its line is the end
// of the line; a position between the two halves of a surrogate pair is
// the start of that character.
func (m *mapper) offset(p protocol.Position) int {
	if int(p.Line) >= len(m.lines) {
		return len(m.text)
	}
	i, end := m.lines[p.Line], m.lineEnd(int(p.Line))
	units := p.Character
	for i < end && units > 0 {
		r, n := utf8.DecodeRuneInString(m.text[i:])
		w := uint32(utf16.RuneLen(r))
		if w > units {
			break
		}
		units -= w
		i += n
	}
	return i
}

// rng converts a diagnostic range into an LSP range by its byte offsets.
func (m *mapper) rng(r diag.Range) protocol.Range {
	start, end := r.Start.Byte, r.End.Byte
	if r.IsZero() {
		start, end = 0, 0
	}
	if end < start {
		end = start
	}
	return protocol.Range{Start: m.position(start), End: m.position(end)}
}

// byteRange converts byte offsets into an LSP range.
func (m *mapper) byteRange(start, end int) protocol.Range {
	return protocol.Range{Start: m.position(start), End: m.position(end)}
}

// textChange is one content change of textDocument/didChange. Range is
// nil for a change that replaces the whole text.
type textChange struct {
	Range *protocol.Range `json:"range,omitempty"`
	Text  string          `json:"text"`
}

// applyChanges applies content changes in order, as the protocol asks: each
// range refers to the text left by the change before it.
func applyChanges(text string, changes []textChange) string {
	for _, c := range changes {
		if c.Range == nil {
			text = c.Text
			continue
		}
		m := newMapper(text)
		start, end := m.offset(c.Range.Start), m.offset(c.Range.End)
		if end < start {
			start, end = end, start
		}
		text = text[:start] + c.Text + text[end:]
	}
	return text
}
