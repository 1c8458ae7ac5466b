package format

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/internal/golden"
	"pipe/lang/syntax"
	"pipe/stdlib"
)

// layers is the option pipe fmt passes: the registry's layer names.
var layers = WithLayers(stdlib.IsLayer)

// TestGolden formats every testdata/x.pipe and compares the result with
// testdata/x.fmt; -update rewrites the .fmt files that differ.
func TestGolden(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.pipe")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src := readFile(t, path)
			got, err := Source(src, layers)
			if err != nil {
				t.Fatalf("Source: %v", err)
			}
			checkInvariants(t, src, got)
			golden.Check(t, strings.TrimSuffix(path, ".pipe")+".fmt", got)
		})
	}
}

// TestExamplesAreFixedPoints keeps examples/ in canonical style.
func TestExamplesAreFixedPoints(t *testing.T) {
	for path, src := range examples(t) {
		got, err := Source(src, layers)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !bytes.Equal(got, src) {
			t.Errorf("%s is not formatted; run pipe fmt -w on it. Formatted:\n%s", path, got)
		}
	}
}

// TestMessy checks the file with every kind of comment in odd places, CRLF
// line ends, tabs and a byte order mark, beyond what its golden file shows.
func TestMessy(t *testing.T) {
	src := readFile(t, "testdata/messy.pipe")
	if !bytes.HasPrefix(src, []byte("\uFEFF")) || !bytes.Contains(src, []byte("\r\n")) ||
		!bytes.Contains(src, []byte("\t")) || bytes.HasSuffix(src, []byte("\n")) {
		t.Fatal("testdata/messy.pipe lost its BOM, CRLFs, tabs or missing final newline; see testdata/.gitattributes")
	}
	got, err := Source(src, layers)
	if err != nil {
		t.Fatal(err)
	}
	in, out := comments(src), comments(got)
	if len(in) != 16 {
		t.Fatalf("messy.pipe should hold 16 comments, the lexer found %d: %q", len(in), in)
	}
	if !slices.Equal(in, out) {
		t.Errorf("comments changed:\nbefore %q\nafter  %q", in, out)
	}
	for _, want := range []string{
		"// messy: a byte order mark, CRLF line ends, tabs, odd comments\n",
		"/* before the pipeline */ pipeline  messy  // trailing, after a tab\n",
		"// before a block, indented with a tab\nsource  scene  geotiff {  // after the brace\n",
		"    4, /* between elements */ 5,\n    // at column one inside a list\n    6]\n",
		"  x = conv 32 k3 ->  // chain, then a comment line\n    // between chain lines\n    relu ->\n\n    dense 4\n",
		"  tile  64x64 stride 48\n}\n",
		"   of the file */ // and a line comment with no newline after it\n",
	} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("output lacks %q; got:\n%s", want, got)
		}
	}
	checkInvariants(t, src, got)
}

// TestLayout pins single rules on small inputs.
func TestLayout(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"empty", "", ""},
		{"blank only", "\n \n\t\n", ""},
		{"final newline", "pipeline p", "pipeline p\n"},
		{"two spaces stay two", "train { epochs 5     batch 64 }", "train { epochs 5  batch 64 }\n"},
		{"one-line block", "predict {source s}", "predict { source s }\n"},
		{"empty block", "train { }", "train {}\n"},
		{"commas", "augment [ a ,b,   c ]", "augment [a, b, c]\n"},
		{"arrow", "model m {\n  conv 3->relu  ->  dense 4\n}", "model m {\n  conv 3 -> relu -> dense 4\n}\n"},
		{"call keeps adjacency", "train {\n  batch auto(max 256)\n}", "train {\n  batch auto(max 256)\n}\n"},
		{"group keeps its space", "model m {\n  add (x)\n  2 *(conv 3)\n}", "model m {\n  add (x)\n  2 * (conv 3)\n}\n"},
		{"single key is single-spaced", "train {\n  epochs    5\n}", "train {\n  epochs 5\n}\n"},
		{"keys align", "train {\n  epochs 5\n  effective_batch 64\n}", "train {\n  epochs          5\n  effective_batch 64\n}\n"},
		{"label ends a run", "m {\n  ab 1\n  x = c\n  abc 2\n}", "m {\n  ab 1\n  x = c\n  abc 2\n}\n"},
		{"comments align", "t {\n  a 1 // x\n  bbb 22 // y\n}", "t {\n  a   1   // x\n  bbb 22  // y\n}\n"},
		{"crlf", "t {\r\n  a 1\r\n}\r\n", "t {\n  a 1\n}\n"},
		{"bom", "\uFEFFpipeline p\n", "pipeline p\n"},
		{"closer dedents", "t {\n  l [\n      a,\n      ]\n    }", "t {\n  l [\n    a,\n  ]\n}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Source([]byte(tc.src), layers)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Source(%q)\n got %q\nwant %q", tc.src, got, tc.want)
			}
			checkInvariants(t, []byte(tc.src), got)
		})
	}
}

// TestErrorsAreNotFormatted checks that a file with syntax errors comes back
// as the parser's diagnostics, unformatted.
func TestErrorsAreNotFormatted(t *testing.T) {
	for _, src := range []string{
		"train { epochs 5\n",
		"train { epochs 5 }}\n",
		"train { epochs \"5 }\n",
		"/* never closed\n",
		"train { epochs 5 # }\n",
		"train\n{ epochs 5 }\n",
		"a\x00b\n",
	} {
		out, err := Source([]byte(src), layers)
		if err == nil {
			t.Errorf("Source(%q) = %q, want an error", src, out)
			continue
		}
		var ds diag.Diagnostics
		if !errors.As(err, &ds) || !ds.HasErrors() {
			t.Errorf("Source(%q): error %v does not wrap diag.Diagnostics with errors", src, err)
		}
		if out != nil {
			t.Errorf("Source(%q) returned output %q with its error", src, out)
		}
	}
}

// FuzzFormat checks that Source never panics and that whatever it formats
// is idempotent and changes only whitespace.
func FuzzFormat(f *testing.F) {
	for _, src := range examples(f) {
		f.Add(src)
	}
	paths, _ := filepath.Glob("testdata/*.pipe")
	for _, p := range paths {
		f.Add(readFile(f, p))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		got, err := Source(src, layers)
		if err != nil {
			return
		}
		checkInvariants(t, src, got)
	})
}

// checkInvariants asserts what holds for every formatted file: the tokens
// other than whitespace are unchanged (comments compared without trailing
// whitespace and CRs), so is every name written right against a '(', the
// output parses cleanly, has no trailing whitespace or CR, ends in exactly
// one newline, and formatting it again changes nothing.
func checkInvariants(t *testing.T, src, got []byte) {
	t.Helper()
	if a, b := words(src), words(got); !slices.Equal(a, b) {
		t.Fatalf("tokens changed:\nbefore %q\nafter  %q", a, b)
	}
	if a, b := stripSpace(src), stripSpace(got); a != b {
		t.Fatalf("non-whitespace text changed:\nbefore %q\nafter  %q", a, b)
	}
	if a, b := calls(src), calls(got); a != b {
		t.Fatalf("names written against '(' went from %d to %d", a, b)
	}
	if _, ds := syntax.Parse("out.pipe", got); ds.HasErrors() {
		t.Fatalf("output does not parse: %v\n%s", ds, got)
	}
	if len(got) > 0 && (!bytes.HasSuffix(got, []byte("\n")) || bytes.HasSuffix(got, []byte("\n\n"))) {
		t.Fatalf("output does not end in exactly one newline: %q", got)
	}
	for i, l := range strings.Split(string(got), "\n") {
		if strings.TrimRight(l, " \t\r\f") != l {
			t.Fatalf("output line %d ends in whitespace: %q", i+1, l)
		}
	}
	again, err := Source(got, layers)
	if err != nil {
		t.Fatalf("formatted output does not format: %v", err)
	}
	if !bytes.Equal(again, got) {
		t.Fatalf("not idempotent:\nonce:\n%s\ntwice:\n%s", got, again)
	}
}

// words returns the tokens of src other than whitespace and newlines, each
// as kind and text, with comments normalised as the formatter may change
// them.
func words(src []byte) []string {
	var out []string
	for _, tk := range syntax.Tokens(string(src)) {
		switch tk.Kind {
		case syntax.KindSpace, syntax.KindNewline, syntax.KindEOF:
			continue
		case syntax.KindComment:
			out = append(out, "comment "+normComment(tk.Text))
		default:
			out = append(out, strconv.Itoa(int(tk.Kind))+" "+tk.Text)
		}
	}
	return out
}

// comments returns the comments of src, normalised.
func comments(src []byte) []string {
	var out []string
	for _, tk := range syntax.Tokens(string(src)) {
		if tk.Kind == syntax.KindComment {
			out = append(out, normComment(tk.Text))
		}
	}
	return out
}

func normComment(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t\r\f\uFEFF")
	}
	return strings.Join(lines, "\n")
}

// stripSpace removes every whitespace character the lexer knows.
func stripSpace(src []byte) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(" \t\f\r\n\uFEFF", r) {
			return -1
		}
		return r
	}, string(src))
}

// calls counts the names written right against a following '('.
func calls(src []byte) int {
	n := 0
	toks := syntax.Tokens(string(src))
	for i := 1; i < len(toks); i++ {
		if toks[i].Kind == syntax.KindPunct && toks[i].Text == "(" && toks[i-1].Kind == syntax.KindIdent {
			n++
		}
	}
	return n
}

func examples(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../examples/*.pipe")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		out[p] = readFile(t, p)
	}
	return out
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
