package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestTorchrunRestartsAKilledRank: two torchrun agents (--max_restarts 1)
// each start pipe as one rank; once the run has checkpointed, rank 1's
// pipe is killed (SIGKILL). torchrun restarts both ranks, each continues
// from the run's last checkpoint without --resume, and the run completes.
func TestTorchrunRestartsAKilledRank(t *testing.T) {
	py := torchPython(t)
	torchrun := torchrunPath(t)
	// 64 samples, 16 a step over the two ranks: 4 steps an epoch.
	src := `pipeline tr
seed 3
source blobs synthetic { samples 64  shape [12]  classes 4  seed 5 }
model net {
  input [12]
  dense 32 -> relu -> dense 4
}
train { epochs 40  batch 8  optimizer adam lr 0.01  loss cross_entropy }
`
	dir, file := tiny(t, src)
	endpoint := "127.0.0.1:" + freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		outs   [2]strings.Builder
		errs   [2]error
		agents [2]*exec.Cmd
		killed = make(chan struct{})
		once   sync.Once
	)
	for n := range 2 {
		// Debian's torchrun 1.13 needs --redirects and --tee set; both
		// ranks share the checkpoint folder, as on a shared file system.
		cmd := exec.CommandContext(ctx, torchrun, "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
			"--rdzv_endpoint", endpoint, "--max_restarts", "1", "--redirects", "1", "--tee", "1", "--no_python", os.Args[0],
			"run", "--engine", "torch", "--python", py, "--checkpoint-dir", filepath.Join(dir, "ckpt"),
			"--report", filepath.Join(dir, fmt.Sprintf("node%d.json", n)), file)
		cmd.Env = append(os.Environ(), "PIPE_TEST_MAIN=1")
		r, w := io.Pipe()
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		agents[n] = cmd
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[n] = cmd.Wait()
			w.Close()
		}()
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				line := sc.Text()
				mu.Lock()
				outs[n].WriteString(line + "\n")
				mu.Unlock()
				// After the third epoch's checkpoint, kill rank 1's pipe.
				if n == 0 && strings.Contains(line, "epoch done: epoch=3/") {
					once.Do(func() {
						if pid := childOf(agents[1].Process.Pid); pid > 0 {
							syscall.Kill(pid, syscall.SIGKILL)
						}
						close(killed)
					})
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	both := outs[0].String() + outs[1].String()
	select {
	case <-killed:
	default:
		t.Fatalf("the run never reached its third epoch\n%s", both)
	}
	for n := range 2 {
		if errs[n] != nil {
			t.Fatalf("torchrun %d: %v\n%s\n%s", n, errs[n], outs[0].String(), outs[1].String())
		}
	}
	if c := strings.Count(both, "continuing from the run's last checkpoint"); c != 2 {
		t.Errorf("%d ranks continued from the checkpoint, want 2\n%s", c, both)
	}
	rep := readJSON(t, mustRead(t, filepath.Join(dir, "node0.json")))
	from, _ := rep["resumed_from"].(map[string]any)
	if from == nil || from["step"].(float64) < 12 || rep["steps"].(float64) != 160 || rep["status"] != "completed" {
		t.Errorf("resumed from %v; %v steps, %v", rep["resumed_from"], rep["steps"], rep["status"])
	}
	t.Logf("rank 1 killed after epoch 3; both ranks continued from step %v to step %v", from["step"], rep["steps"])
}

// torchrunPath is torchrun's path; the test is skipped without one,
// unless PIPE_REQUIRE_TORCH says torch must be there.
func torchrunPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("torchrun")
	if err != nil {
		if os.Getenv("PIPE_REQUIRE_TORCH") != "" {
			t.Fatal("torchrun is not on the PATH (Debian's python3-torch has it)")
		}
		t.Skip("no torchrun")
	}
	return p
}

// childOf is the first child process of pid (torchrun's worker), 0 when
// it has none.
func childOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	c, _ := strconv.Atoi(f[0])
	return c
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRestartedWorldContinuesOnEveryRank: two ranks started by hand as
// torchrun starts them after rank 1 failed once and rank 0's node was
// healthy: rank 1 with TORCHELASTIC_RESTART_COUNT=1, rank 0 with 0
// (torchrun counts only the ranks it restarted for a failure), in the
// folder of a first run of the two that stopped at step 3. Both ranks
// continue from step 3, rank 0 too, and the run completes; a rank's own
// count decided it before, and rank 0 started afresh.
func TestRestartedWorldContinuesOnEveryRank(t *testing.T) {
	py := torchPython(t)
	// 64 samples, 16 a step over the two ranks: 4 steps an epoch.
	src := `pipeline world
seed 3
source blobs synthetic { samples 64  shape [12]  classes 4  seed 5 }
model net {
  input [12]
  dense 16 -> relu -> dense 4
}
train { epochs 2  batch 8  optimizer adam lr 0.01  loss cross_entropy }
`
	dir, file := tiny(t, src)
	ckpt := filepath.Join(dir, "ckpt")
	start := func(counts [2]int, more ...string) [2]string {
		port := freePort(t)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		var outs [2]string
		for n := range 2 {
			args := append([]string{"run", "--engine", "torch", "--python", py, "--threads", "1", "--checkpoint-dir", ckpt,
				"--report", filepath.Join(dir, fmt.Sprintf("rank%d.json", n))}, append(more, file)...)
			cmd := exec.CommandContext(ctx, os.Args[0], args...)
			cmd.Env = append(os.Environ(), "PIPE_TEST_MAIN=1", "PIPE_RUN_ID=", "SLURM_JOB_ID=", "TORCHELASTIC_RUN_ID=",
				"RANK="+strconv.Itoa(n), "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "GROUP_RANK="+strconv.Itoa(n),
				"GROUP_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port,
				"TORCHELASTIC_RESTART_COUNT="+strconv.Itoa(counts[n]), "TORCHELASTIC_MAX_RESTARTS=1")
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := cmd.CombinedOutput()
				outs[n] = string(out)
				if err != nil {
					outs[n] += fmt.Sprintf("\n(rank %d: %v)", n, err)
				}
			}()
		}
		wg.Wait()
		for n := range 2 {
			if strings.Contains(outs[n], fmt.Sprintf("(rank %d:", n)) {
				t.Fatalf("rank %d failed\n%s\n----\n%s", n, outs[0], outs[1])
			}
		}
		return outs
	}
	start([2]int{0, 0}, "--max-steps", "3")
	outs := start([2]int{0, 1})
	for n := range 2 {
		if !strings.Contains(outs[n], "continuing from the run's last checkpoint") || strings.Contains(outs[n], "will be replaced") {
			t.Errorf("rank %d did not continue the run\n%s", n, outs[n])
		}
	}
	rep := readJSON(t, mustRead(t, filepath.Join(dir, "rank0.json")))
	from, _ := rep["resumed_from"].(map[string]any)
	if from == nil || from["step"].(float64) != 3 || rep["steps"].(float64) != 8 || rep["status"] != "completed" {
		t.Errorf("rank 0 resumed from %v; %v steps, %v", rep["resumed_from"], rep["steps"], rep["status"])
	}
}
