package openblas

import "testing"

func TestThreads(t *testing.T) {
	old := Threads()
	SetThreads(1)
	if Threads() != 1 {
		t.Errorf("threads %d after SetThreads(1)", Threads())
	}
	SetThreads(old)
	t.Logf("OpenBLAS %s, core %s", Config(), CoreName())
}
