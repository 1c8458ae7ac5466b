// Package progtest checks and decodes .pipe programs for tests, as the
// commands do, failing the test on any error: the helpers that test
// packages of the engines, the data readers, serve, export and cmd/pipe
// would otherwise each keep a copy of.
package progtest

import (
	"testing"

	"pipe/lang"
	"pipe/spec"
	"pipe/stdlib"
)

// Decoded is prog decoded for the run loop and the engines
// (stdlib.Decode), as pipe run decodes it.
func Decoded(t testing.TB, prog *lang.Program) *stdlib.Program {
	t.Helper()
	dec, ds := stdlib.Decode(prog)
	if ds.HasErrors() {
		t.Fatalf("decode: %v", ds)
	}
	return dec
}

// Source parses and checks src, a snippet holding one source block, and
// returns the block's decoded spec (stdlib.DecodeSource).
func Source(t testing.TB, src string) *spec.Source {
	t.Helper()
	f, ds := lang.Parse("test.pipe", []byte(src))
	if ds.HasErrors() {
		t.Fatalf("parse: %v", ds)
	}
	p, ds := lang.Check(f, stdlib.Schema())
	if ds.HasErrors() {
		t.Fatalf("check: %v", ds)
	}
	b := p.Block("source")
	if b == nil {
		t.Fatal("no source block")
	}
	s, ds := stdlib.DecodeSource(b)
	if ds.HasErrors() {
		t.Fatalf("decode: %v", ds)
	}
	return s
}
