// Package progtest checks and decodes .pipe programs for tests, as the
// commands do, failing the test on any error: the helpers that test
// packages of the engines, the data readers, serve, export and cmd/pipe
// would otherwise each keep a copy of.
package progtest

import (
	"testing"

	"pipe/lang"
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
