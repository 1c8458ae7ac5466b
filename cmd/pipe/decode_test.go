package main

import (
	"testing"

	"pipe/lang"
	"pipe/stdlib"
)

// decoded is prog decoded for the executor, as pipe run decodes it.
func decoded(t testing.TB, prog *lang.Program) *stdlib.Program {
	t.Helper()
	dec, ds := stdlib.Decode(prog)
	if ds.HasErrors() {
		t.Fatalf("decode: %v", ds)
	}
	return dec
}
