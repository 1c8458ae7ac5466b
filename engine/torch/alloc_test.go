package torch

import (
	"slices"
	"strings"
	"testing"
)

// TestAllocatorEnv: a worker on the CPU gets tcmalloc preloaded where its
// library is present; one on a GPU, or one whose LD_PRELOAD the caller
// set, keeps what it had.
func TestAllocatorEnv(t *testing.T) {
	t.Setenv("LD_PRELOAD", "")
	name, lib := CPUAllocator()
	got := allocatorEnv([]string{"A=1"}, "cpu")
	if lib == "" {
		if name != "" || !slices.Equal(got, []string{"A=1"}) {
			t.Errorf("without tcmalloc's library: %q, %v", name, got)
		}
	} else if name != TCMalloc || !slices.Equal(got, []string{"A=1", "LD_PRELOAD=" + lib}) || !strings.HasSuffix(lib, tcmallocLib) {
		t.Errorf("with %s: %q, %v", lib, name, got)
	}
	for _, dev := range []string{"cuda", "cuda:1"} {
		if got := allocatorEnv([]string{"A=1"}, dev); !slices.Equal(got, []string{"A=1"}) {
			t.Errorf("%s: %v", dev, got)
		}
	}
	if got := allocatorEnv([]string{"LD_PRELOAD=x.so"}, ""); !slices.Equal(got, []string{"LD_PRELOAD=x.so"}) {
		t.Errorf("the caller's LD_PRELOAD: %v", got)
	}
	t.Setenv("LD_PRELOAD", "x.so")
	if name, lib := CPUAllocator(); name != "" || lib != "" {
		t.Errorf("under LD_PRELOAD: %q %q", name, lib)
	}
}
