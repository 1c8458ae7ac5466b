package torch

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pipe/engine"
)

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

func killProcess(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

// TestRendezvousPort: a port asked for is kept; with every rank on this
// machine none asked for is a free one, so two runs do not meet; across
// machines the default is the one the others assume.
func TestRendezvousPort(t *testing.T) {
	if p, err := rendezvousPort(12345, true); err != nil || p != 12345 {
		t.Errorf("asked 12345: %d, %v", p, err)
	}
	if p, err := rendezvousPort(0, false); err != nil || p != 29500 {
		t.Errorf("across machines: %d, %v", p, err)
	}
	p, err := rendezvousPort(0, true)
	if err != nil || p <= 0 {
		t.Fatalf("on one machine: %d, %v", p, err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("port %d is not free: %v", p, err)
	}
	l.Close()
}

// TestLostPeerIsWorkerLost: a dead worker, and a rank whose peer went
// away, are engine.ErrWorkerLost (the run's advice: resume as is); a
// failure of the model's own is not.
func TestLostPeerIsWorkerLost(t *testing.T) {
	peer := replyErr(response{failure: failure{Kind: kindError, Error: "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:2"}}, 0)
	own := replyErr(response{failure: failure{Kind: kindError, Error: "RuntimeError: mat1 and mat2 shapes cannot be multiplied"}}, 0)
	dead := &WorkerError{Rank: 1, PID: 7, Err: errors.New("signal: killed")}
	if !errors.Is(peer, engine.ErrWorkerLost) || !errors.Is(dead, engine.ErrWorkerLost) || errors.Is(own, engine.ErrWorkerLost) {
		t.Errorf("lost: peer %v, dead %v, own %v", errors.Is(peer, engine.ErrWorkerLost), errors.Is(dead, engine.ErrWorkerLost), errors.Is(own, engine.ErrWorkerLost))
	}
}

// TestKilledWorkerLeavesNoFolder: a worker's folder goes when the worker
// dies, before anyone closes it, and closing it after is harmless; a
// folder left by a pipe that no longer runs is swept at the next start,
// one of a running pipe is kept.
func TestKilledWorkerLeavesNoFolder(t *testing.T) {
	py := testPython(t)
	w, err := startWorker(py, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.dir); err != nil || !strings.HasPrefix(filepath.Base(w.dir), fmt.Sprintf("pipe-torch-%d-", os.Getpid())) {
		t.Fatalf("worker folder %s: %v", w.dir, err)
	}
	killProcess(w.cmd.Process.Pid)
	select {
	case <-w.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed worker did not exit")
	}
	if _, err := os.Stat(w.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dead worker's folder %s is still there: %v", w.dir, err)
	}
	w.close()

	tmp := t.TempDir()
	done := osexec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(tmp, fmt.Sprintf("pipe-torch-%d-123", done.Process.Pid))
	mine := filepath.Join(tmp, fmt.Sprintf("pipe-torch-%d-456", os.Getpid()))
	other := filepath.Join(tmp, "pipe-torch-789") // the old naming: no pid to check
	for _, d := range []string{stale, mine, other} {
		if err := os.MkdirAll(filepath.Join(d, PackageName), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sweepStale(tmp)
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale folder is still there: %v", err)
	}
	for _, d := range []string{mine, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was swept: %v", d, err)
		}
	}
}

// cpuPersonality is the environment that chooses the worker's CPU kernels:
// oneDNN's instruction sets and OpenBLAS's kernel family. make test-cpus
// sets each; it means nothing unless the worker sees it.
var cpuPersonality = []string{"ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE"}

// TestWorkerSeesTheCPUPersonality: the worker's environment, as the OS
// keeps it (/proc/PID/environ), holds pipe's own ONEDNN_MAX_CPU_ISA and
// OPENBLAS_CORETYPE, as set for the test or, unset, set here.
func TestWorkerSeesTheCPUPersonality(t *testing.T) {
	py := testPython(t)
	want := map[string]string{}
	for _, k := range cpuPersonality {
		v, ok := os.LookupEnv(k)
		if !ok {
			v = map[string]string{"ONEDNN_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}[k]
			t.Setenv(k, v)
		}
		want[k] = v
	}
	w, err := startWorker(py, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", w.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc environ: %v", err)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the worker's %s is %q, pipe's %q", k, got[k], v)
		}
	}
}
