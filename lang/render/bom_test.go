package render

import (
	"bytes"
	"testing"

	"pipe/diag"
)

// A file saved with a byte order mark shows its first line without it, and
// the caret under the word, not one column to its right.
func TestTextCaretAfterByteOrderMark(t *testing.T) {
	src := []byte("\uFEFFpipelinee x\r\n")
	r := diag.Range{File: "b.pipe", Start: diag.Pos{Line: 1, Column: 4, Byte: 3}, End: diag.Pos{Line: 1, Column: 13, Byte: 12}}
	ds := diag.Diagnostics{diag.Errorf(r, "unknown-field", "unknown setting 'pipelinee'", "")}
	var b bytes.Buffer
	if err := Text(&b, ds, Sources{"b.pipe": src}, Options{}); err != nil {
		t.Fatal(err)
	}
	want := "b.pipe:1:4: error: unknown setting 'pipelinee' [unknown-field]\n" +
		" 1 | pipelinee x\n" +
		"   | ^^^^^^^^^\n"
	if b.String() != want {
		t.Fatalf("got:\n%q\nwant:\n%q", b.String(), want)
	}
}
