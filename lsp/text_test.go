package lsp

import (
	"testing"

	"go.lsp.dev/protocol"
)

func pos(line, char uint32) protocol.Position { return protocol.Position{Line: line, Character: char} }

func TestMapperUTF16(t *testing.T) {
	// "é" is 2 bytes and 1 UTF-16 unit; "😀" is 4 bytes and 2 units.
	text := "// é😀 x\r\nconv\rrelu\n"
	m := newMapper(text)
	tests := []struct {
		off  int
		want protocol.Position
	}{
		{0, pos(0, 0)},
		{3, pos(0, 3)},  // é
		{5, pos(0, 4)},  // 😀
		{9, pos(0, 6)},  // the space after 😀
		{10, pos(0, 7)}, // x
		{11, pos(0, 8)}, // \r of \r\n: end of line
		{13, pos(1, 0)}, // conv
		{17, pos(1, 4)}, // lone \r
		{18, pos(2, 0)}, // relu
		{len(text), pos(3, 0)},
	}
	for _, tt := range tests {
		if got := m.position(tt.off); got != tt.want {
			t.Errorf("position(%d) = %v, want %v", tt.off, got, tt.want)
		}
		if got := m.offset(tt.want); got != tt.off {
			t.Errorf("offset(%v) = %d, want %d", tt.want, got, tt.off)
		}
	}
	// Inside a character: counted from its start.
	if got := m.position(6); got != pos(0, 4) {
		t.Errorf("position inside 😀 = %v", got)
	}
	// Between the halves of a surrogate pair: the start of the character.
	if got := m.offset(pos(0, 5)); got != 5 {
		t.Errorf("offset between surrogates = %d, want 5", got)
	}
	// Past the end of a line, and past the last line.
	if got := m.offset(pos(1, 99)); got != 17 {
		t.Errorf("offset past the line's end = %d, want 17", got)
	}
	if got := m.offset(pos(9, 0)); got != len(text) {
		t.Errorf("offset past the last line = %d, want %d", got, len(text))
	}
}

func TestApplyChanges(t *testing.T) {
	text := "model m {\n  conv 32 k3\n}\n"
	r := func(l1, c1, l2, c2 uint32) *protocol.Range {
		return &protocol.Range{Start: pos(l1, c1), End: pos(l2, c2)}
	}
	got := applyChanges(text, []textChange{
		{Range: r(1, 7, 1, 9), Text: "64"},         // 32 -> 64
		{Range: r(1, 12, 1, 12), Text: " -> relu"}, // append, on the text left by the first change
		{Range: r(0, 6, 0, 7), Text: "é"},          // a non-ASCII name
	})
	want := "model é {\n  conv 64 k3 -> relu\n}\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := applyChanges(text, []textChange{{Text: "x"}}); got != "x" {
		t.Errorf("a change without a range replaces the text; got %q", got)
	}
	// A range after the non-ASCII character counts UTF-16 units.
	got = applyChanges("// é\nx", []textChange{{Range: r(0, 4, 0, 4), Text: "!"}})
	if got != "// é!\nx" {
		t.Errorf("got %q", got)
	}
}
