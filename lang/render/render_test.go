package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"pipe/diag"
)

func TestTextQuotesLineAndCaret(t *testing.T) {
	src := []byte("model m {\n  conv 32 k3 -> rleu\n}\n")
	r := diag.Range{File: "m.pipe", Start: diag.Pos{Line: 2, Column: 17, Byte: 26}, End: diag.Pos{Line: 2, Column: 21, Byte: 30}}
	ds := diag.Diagnostics{diag.Errorf(r, "unknown-layer", "unknown layer 'rleu'", "Did you mean 'relu'?")}
	var b bytes.Buffer
	if err := Text(&b, ds, Sources{"m.pipe": src}, Options{}); err != nil {
		t.Fatal(err)
	}
	want := "m.pipe:2:17: error: unknown layer 'rleu' [unknown-layer]\n" +
		" 2 |   conv 32 k3 -> rleu\n" +
		"   |                 ^^^^\n" +
		"      = Did you mean 'relu'?\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestTextColorOnlyWhenAsked(t *testing.T) {
	r := diag.Range{File: "x", Start: diag.Pos{Line: 1, Column: 1}}
	ds := diag.Diagnostics{diag.Errorf(r, "c", "s", "")}
	var plain, col bytes.Buffer
	_ = Text(&plain, ds, nil, Options{})
	_ = Text(&col, ds, nil, Options{Color: true})
	if strings.Contains(plain.String(), "\x1b[") || !strings.Contains(col.String(), "\x1b[") {
		t.Fatalf("colour: plain=%q colour=%q", plain.String(), col.String())
	}
}

func TestJSONEmptyIsArray(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, nil); err != nil {
		t.Fatal(err)
	}
	var v []any
	if err := json.Unmarshal(b.Bytes(), &v); err != nil || v == nil || len(v) != 0 {
		t.Fatalf("want [], got %q", b.String())
	}
}
