package syntax

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pipe/internal/golden"
	"pipe/lang/ast"
)

func TestGrammarEBNF(t *testing.T) {
	golden.Check(t, "testdata/grammar.ebnf", []byte(EBNF()+"\n"))
}

func examples(t testing.TB) map[string][]byte {
	paths, err := filepath.Glob("../../examples/*.pipe")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = b
	}
	return out
}

func TestExamplesParse(t *testing.T) {
	for name, src := range examples(t) {
		f, ds := Parse(name, src)
		if len(ds) > 0 {
			t.Errorf("%s: %v", name, ds)
		}
		if len(f.Stmts) == 0 {
			t.Errorf("%s: no statements", name)
		}
	}
}

// TestRanges checks that every node's range points at its own text.
func TestRanges(t *testing.T) {
	src := "model m {\n  x = conv 32 k3 -> relu  // c\n  add(x -> dense 4) -> dropout 0.5\n}\ntrain { lr 1e-3 batch auto(max 256) tile 64x64 mem 24GiB name \"s\" }\n"
	f, ds := Parse("r.pipe", []byte(src))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	ast.Walk(f, func(n ast.Node) bool {
		r := n.Rng()
		text := src[r.Start.Byte:r.End.Byte]
		var want string
		switch n := n.(type) {
		case *ast.Ident:
			want = n.Name
		case *ast.Number:
			want = n.Text
		case *ast.Size:
			want = n.Text
		case *ast.String:
			want = `"` + n.Value + `"`
		case *ast.Punct:
			want = n.Op
		default:
			return true
		}
		if text != want {
			t.Errorf("%T at %v covers %q, want %q", n, r, text, want)
		}
		// Line and column must agree with the byte offset.
		lineStart := strings.LastIndex(src[:r.Start.Byte], "\n") + 1
		if r.Start.Column != r.Start.Byte-lineStart+1 || r.Start.Line != strings.Count(src[:r.Start.Byte], "\n")+1 {
			t.Errorf("%T %q: position %v inconsistent with byte %d", n, want, r.Start, r.Start.Byte)
		}
		return true
	})
	label := f.Stmts[0].Body.Stmts[0].Label
	if label == nil || label.Name != "x" {
		t.Fatalf("label not lowered: %+v", f.Stmts[0].Body.Stmts[0])
	}
	num := f.Stmts[1].Body.Stmts[0].Words[8].(*ast.Number)
	if num.Unit != "GiB" || num.Value != 24 || !num.IsInt {
		t.Errorf("24GiB lowered as %+v", num)
	}
	exp := f.Stmts[1].Body.Stmts[0].Words[1].(*ast.Number)
	if exp.Unit != "" || exp.Value != 1e-3 || exp.IsInt {
		t.Errorf("1e-3 lowered as %+v", exp)
	}
}

// TestRecovery: a syntax error in one statement does not hide the others.
func TestRecovery(t *testing.T) {
	src := "pipeline p\nsource a idx { images \"x\" ]\nmodel m {\n  dense 3 ,\n}\ntrain { epochs 3 }\n"
	f, ds := Parse("rec.pipe", []byte(src))
	if len(ds) != 2 {
		t.Fatalf("want 2 diagnostics, got %d: %v", len(ds), ds)
	}
	if ds[0].Subject.Start.Line != 2 || ds[1].Subject.Start.Line != 4 {
		t.Errorf("lines: %v", ds)
	}
	var heads []string
	for _, s := range f.Stmts {
		heads = append(heads, s.Words[0].(*ast.Ident).Name)
	}
	if strings.Join(heads, ",") != "pipeline,train" {
		t.Errorf("recovered statements: %v", heads)
	}
}

// TestUnclosedBraceRecovers: an unclosed block still lets later top-level
// statements parse.
func TestUnclosedBraceRecovers(t *testing.T) {
	src := "model m {\n  dense 3\n\ntrain { epochs 3 }\nevaluate { source s }\n"
	f, ds := Parse("u.pipe", []byte(src))
	if len(ds) == 0 || !strings.Contains(ds[0].Summary, "unclosed") || ds[0].Subject.Start.Line != 1 {
		t.Fatalf("diagnostics: %v", ds)
	}
	if len(f.Stmts) != 2 {
		t.Fatalf("want train and evaluate recovered, got %d statements", len(f.Stmts))
	}
}

func TestBadInput(t *testing.T) {
	deep := strings.Repeat("(", 10000) + strings.Repeat(")", 10000)
	big := strings.Repeat("// filler line of a huge file\n", 10<<20/29+1)
	cases := []struct {
		name, src, code string
	}{
		{"empty", "", ""},
		{"only comments", "// nothing\n/* here */\n", ""},
		{"binary", "\x7fELF\x02\x01\x01\x00\x00", "binary-file"},
		{"invalid utf8", "pipeline \xff\xfe\n", "invalid-utf8"},
		{"huge", big, "file-too-large"},
		{"deep parens", "model m { x " + deep + " }", "too-deep"},
		{"unterminated string", "source s idx { images \"abc\n}\n", "unterminated-string"},
		{"unterminated comment", "pipeline p\n/* never closed\n", "unterminated-comment"},
		{"bom", "\ufeffpipeline p\n", ""},
		{"crlf", "pipeline p\r\ntrain {\r\n  epochs 3\r\n}\r\n", ""},
		{"stray closer", "}\npipeline p\n", "unbalanced"},
		{"invalid char", "pipeline p @\n", "invalid-character"},
		{"unicode names", "pipeline café\nsource données synthetic { samples 10 }\nmodel modèle {\n  input [2]\n}\n", ""},
		{"symbol in a name", "model m★odel {\n  input [2]\n}\n", "invalid-name"},
		{"bad escape", "source s idx { images \"a\\qb\" }\n", "bad-string"},
		{"huge number", "train { epochs 1e999 }\n", "bad-number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			f, ds := Parse(c.name+".pipe", []byte(c.src))
			if f == nil {
				t.Fatal("Parse returned no file")
			}
			if c.code == "" && len(ds) > 0 {
				t.Fatalf("want no diagnostics, got %v", ds)
			}
			if c.code != "" {
				found := false
				for _, d := range ds {
					found = found || d.Code == c.code
					if d.Subject == nil || d.Subject.Start.Line < 1 {
						t.Errorf("diagnostic without position: %v", d)
					}
				}
				if !found {
					t.Fatalf("want a %s diagnostic, got %v", c.code, ds)
				}
			}
			// Not a timing assertion: a guard against hangs, far above any
			// plausible cost.
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}

func TestCRLFPositions(t *testing.T) {
	f, ds := Parse("c.pipe", []byte("pipeline p\r\ntrain {\r\n  epochs 3\r\n}\r\n"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	ep := f.Stmts[1].Body.Stmts[0].Words[0]
	if r := ep.Rng(); r.Start.Line != 3 || r.Start.Column != 3 {
		t.Fatalf("epochs at %v", r.Start)
	}
}

func FuzzParse(f *testing.F) {
	for _, src := range examples(f) {
		f.Add(src)
	}
	f.Add([]byte("model m { x = conv 3 k3 -> add(x -> dense 2) }"))
	f.Add([]byte("train { batch auto(min 8 max 256) } /* x"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, ds := Parse("fuzz.pipe", src)
		if file == nil {
			t.Fatal("nil file")
		}
		for _, d := range ds {
			if d.Subject == nil {
				t.Fatalf("diagnostic without subject: %v", d)
			}
			if d.Subject.Start.Byte < 0 || d.Subject.End.Byte > len(src) || d.Subject.End.Byte < d.Subject.Start.Byte {
				t.Fatalf("range %v outside source of %d bytes", d.Subject, len(src))
			}
		}
		ast.Walk(file, func(n ast.Node) bool {
			r := n.Rng()
			if r.Start.Byte < 0 || r.End.Byte > len(src) || r.End.Byte < r.Start.Byte {
				t.Fatalf("%T range %v outside source of %d bytes", n, r, len(src))
			}
			return true
		})
	})
}

// TestOneMistakeOneDiagnostic: a character that belongs in no name, in
// the middle of one, is reported once, and the statement still parses.
func TestOneMistakeOneDiagnostic(t *testing.T) {
	f, ds := Parse("m.pipe", []byte("model m★odel {\n  input [2]\n}\npipeline ok\n"))
	if len(ds) != 1 || ds[0].Code != "invalid-name" || !strings.Contains(ds[0].Detail, "★") {
		t.Fatalf("%v", ds)
	}
	if len(f.Stmts) != 2 {
		t.Errorf("%d statements parsed", len(f.Stmts))
	}
}
