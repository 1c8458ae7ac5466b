package editor

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"pipe/lang/syntax"
	"pipe/stdlib"
)

// TestWordsCoverTheRegistry checks the lists against names the registry
// must contribute, so an empty or truncated list cannot pass.
func TestWordsCoverTheRegistry(t *testing.T) {
	w := Collect(stdlib.Schema())
	s := stdlib.Schema()
	for _, b := range s.BlockNames() {
		if !slices.Contains(w.Blocks, b) {
			t.Errorf("block %q missing", b)
		}
	}
	for _, l := range s.LayerNames() {
		if !slices.Contains(w.Layers, l) && !slices.Contains(w.Families, l) {
			t.Errorf("layer %q missing", l)
		}
	}
	for _, want := range []struct {
		list []string
		word string
	}{
		{w.Fields, "epochs"}, {w.Fields, "tile"}, {w.Fields, "images"}, {w.Args, "lr"},
		{w.Glued, "k"}, {w.Glued, "pad"}, {w.Values, "cross_entropy"}, {w.Values, "a100-80gb"}, {w.Kinds, "geotiff"},
	} {
		if !slices.Contains(want.list, want.word) {
			t.Errorf("%q missing", want.word)
		}
	}
}

// TestGrammarMirrorsTheLexer: the grammar's identifier and number patterns
// accept exactly what the lexer's rules of the same name accept, over the
// words of every example.
func TestGrammarMirrorsTheLexer(t *testing.T) {
	tm, err := TextMate(Collect(stdlib.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	var g grammar
	if err := json.Unmarshal(tm, &g); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(tm, []byte(regexpString(ident))) {
		t.Fatal("the grammar does not use the identifier pattern")
	}
	lexIdent := regexp.MustCompile(`^(?:` + ruleOf(t, "Ident") + `)$`)
	gramIdent := regexp.MustCompile(`^(?:` + ident + `)$`)
	paths, _ := filepath.Glob("../examples/*.pipe")
	for _, p := range paths {
		src, _ := os.ReadFile(p)
		for _, tok := range syntax.Tokens(string(src)) {
			if tok.Kind == syntax.KindIdent && lexIdent.MatchString(tok.Text) != gramIdent.MatchString(tok.Text) {
				t.Errorf("%s: %q: the lexer and the grammar disagree", p, tok.Text)
			}
		}
	}
}

func ruleOf(t *testing.T, name string) string {
	for _, r := range syntax.Rules {
		if r.Name == name {
			return r.Pattern
		}
	}
	t.Fatalf("no lexer rule %s", name)
	return ""
}

func regexpString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
