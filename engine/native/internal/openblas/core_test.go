package openblas

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWithinBoundRejects holds the reference check to what it must
// catch: the library's product passes, and the same product with one
// element moved by twice its bound, or made NaN, fails.
func TestWithinBoundRejects(t *testing.T) {
	const m, n, k = 67, 73, 129
	a, b, c := randMatrix(m*k, 3), randMatrix(k*n, 4), make([]float32, m*n)
	sgemm(m, n, k, a, b, c)
	if !withinBound(m, n, k, a, b, c) {
		t.Fatalf("%s's product fails the reference check", CoreName())
	}
	var abs float64
	for p := 0; p < k; p++ {
		abs += math.Abs(float64(a[5*k+p]) * float64(b[p*n+7]))
	}
	u := math.Ldexp(1, -24)
	bad := slicesClone(c)
	bad[5*n+7] += float32(2 * k * u / (1 - float64(k)*u) * abs)
	if withinBound(m, n, k, a, b, bad) {
		t.Error("a product off by twice the bound passed")
	}
	bad[5*n+7] = float32(math.NaN())
	if withinBound(m, n, k, a, b, bad) {
		t.Error("a NaN product passed")
	}
}

func slicesClone(s []float32) []float32 { return append([]float32(nil), s...) }

// TestChooseKeepsTheUsersCore: a user's OPENBLAS_CORETYPE is never
// changed, whatever the CPU.
func TestChooseKeepsTheUsersCore(t *testing.T) {
	env := map[string]string{CoreEnv: "Prescott"}
	k := choose(func(s string) string { return env[s] }, filepath.Join(t.TempDir(), "c.json"))
	if k.Source != ByUser || k.Core != CoreName() {
		t.Errorf("with OPENBLAS_CORETYPE set: %+v", k)
	}
}

// TestChooseLeavesAFallback simulates a library that falls back to its
// SSE3 core on this CPU (the test hook: Prescott counted as the
// library's own choice): pipe must measure, switch to a faster correct
// core the CPU runs, say so, cache it, and find it in the cache next
// time; the children it starts are told the core.
func TestChooseLeavesAFallback(t *testing.T) {
	if hostISA() < isaAVX {
		t.Skip("this CPU runs no core above SSE")
	}
	orig := CoreName()
	t.Cleanup(func() { useCore(orig) })
	t.Setenv(CoreEnv, "Prescott")
	t.Setenv(ChoseEnv, "")
	if !useCore("Prescott") || CoreName() != "Prescott" {
		t.Skip("the library cannot switch cores (not DYNAMIC_ARCH)")
	}
	env := map[string]string{CoreEnv: "Prescott", AsLibraryEnv: "1"}
	cache := filepath.Join(t.TempDir(), "pipe", "openblas-cores.json")
	k := choose(func(s string) string { return env[s] }, cache)
	t.Logf("%s; tried %+v", k, k.Tried)
	if k.Source != ByPipe || k.Own != "Prescott" || isaOf(k.Core) <= isaSSE || !strings.EqualFold(CoreName(), k.Core) {
		t.Fatalf("after a Prescott fallback: %+v, the library runs %s", k, CoreName())
	}
	var own, pick Trial
	for _, tr := range k.Tried {
		if !tr.OK {
			t.Errorf("core %s failed the reference check", tr.Core)
		}
		switch {
		case tr.Core == "Prescott":
			own = tr
		case strings.EqualFold(tr.Core, k.Core):
			pick = tr
		}
	}
	if pick.GFLOPS <= own.GFLOPS {
		t.Errorf("picked %+v over %+v", pick, own)
	}
	if os.Getenv(CoreEnv) != k.Core || os.Getenv(ChoseEnv) != k.Core {
		t.Errorf("children would get %s=%q %s=%q", CoreEnv, os.Getenv(CoreEnv), ChoseEnv, os.Getenv(ChoseEnv))
	}
	useCore("Prescott")
	again := choose(func(s string) string { return env[s] }, cache)
	if again.Core != k.Core || !strings.HasSuffix(again.Reason, "(cached)") || !strings.EqualFold(CoreName(), k.Core) {
		t.Errorf("from the cache: %+v, the library runs %s", again, CoreName())
	}
	// A child started with what this process exported reports pipe's choice.
	child := choose(os.Getenv, "")
	if child.Source != ByPipe {
		t.Errorf("a child process would report %+v", child)
	}
}
