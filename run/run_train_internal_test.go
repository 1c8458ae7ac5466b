package run

import (
	"errors"
	"fmt"
	"testing"
)

// TestSourceErrorKeepsItsCause: a source's error met while training
// reaches the diagnostic whole (a wrapper of two errors once unwrapped to
// nil here).
func TestSourceErrorKeepsItsCause(t *testing.T) {
	cause := errors.New("x.idx: truncated at byte 512")
	var err error = fmt.Errorf("step: %w", &sourceError{cause})
	se := (*sourceError)(nil)
	if !errors.As(err, &se) || se.err != cause || !errors.Is(err, cause) {
		t.Fatalf("lost the cause: %v", err)
	}
}
