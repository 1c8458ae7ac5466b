package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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

// peersPipe trains long enough for a peer to be stopped or killed after
// node 0's second epoch: 64 steps an epoch over the two nodes.
const peersPipe = `pipeline peers
seed 3
source blobs synthetic { samples 2048  shape [12]  classes 4  seed 5 }
model net {
  input [12]
  dense 64 -> relu -> dense 4
}
train { epochs 200  batch 16  optimizer adam lr 0.01  loss cross_entropy }
`

// peerNode is one node of a two-node run: a pipe run process, as on a
// machine of its own, and what it wrote (stdout and stderr together).
type peerNode struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
	err  error
}

func (n *peerNode) output() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.out.String()
}

// worker is the pid of the node's torch worker, 0 when it has none: a
// child of any of pipe's threads (each thread's children are listed
// apart).
func (n *peerNode) worker() int {
	pid := n.cmd.Process.Pid
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			c, _ := strconv.Atoi(fs[0])
			return c
		}
	}
	return 0
}

// startPeers starts peersPipe as two nodes of one worker each on
// loopback, each in its own folder; act is called once, on node 0's first
// line that holds at.
func startPeers(t *testing.T, ctx context.Context, at string, act func(nodes [2]*peerNode, dirs [2]string)) [2]*peerNode {
	t.Helper()
	py := torchPython(t)
	port := freePort(t)
	cache := t.TempDir()
	var nodes [2]*peerNode
	var dirs [2]string
	var outs [2]*os.File
	for i := range 2 {
		dir, file := tiny(t, peersPipe)
		dirs[i] = dir
		cmd := exec.CommandContext(ctx, os.Args[0], runArgs(dir, "--engine", "torch", "--python", py, "--threads", "1",
			"--nnodes", "2", "--node-rank", strconv.Itoa(i), "--nproc-per-node", "1", "--master-port", port, file)...)
		cmd.Env = append(os.Environ(), "PIPE_TEST_MAIN=1", "XDG_CACHE_HOME="+cache, "PIPE_RUN_ID=", "SLURM_JOB_ID=", "TORCHELASTIC_RUN_ID=")
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = pw, pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		nodes[i], outs[i] = &peerNode{cmd: cmd, done: make(chan struct{})}, pr
	}
	var once sync.Once
	for i, n := range nodes {
		go func() {
			sc := bufio.NewScanner(outs[i])
			for sc.Scan() {
				n.mu.Lock()
				n.out.WriteString(sc.Text() + "\n")
				n.mu.Unlock()
				if i == 0 && strings.Contains(sc.Text(), at) {
					once.Do(func() { act(nodes, dirs) })
				}
			}
			n.err = n.cmd.Wait()
			close(n.done)
		}()
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			if w := n.worker(); w > 0 {
				syscall.Kill(w, syscall.SIGKILL) // a stopped one dies of it too
			}
			n.cmd.Process.Kill()
			<-n.done
		}
	})
	return nodes
}

// exitCode is a finished command's exit status, -1 when it did not exit.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// TestInterruptLeavesAStalledPeer: of two nodes, node 1's worker is
// stopped (SIGSTOP) after node 0's second epoch, and node 0 gets the
// first Ctrl-C. Node 0 gives up the step that waits on the stalled peer:
// it exits 130 well before the collective's timeout (300 s), says a peer
// rank was stalled, leaves its last checkpoint as it was and its worker
// dead. Before, the first Ctrl-C waited in the all-reduce for the
// collective's timeout.
func TestInterruptLeavesAStalledPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var ckpt []byte
	var worker0 int
	var interrupted time.Time
	var dirs [2]string
	nodes := startPeers(t, ctx, "epoch done: epoch=2/", func(nodes [2]*peerNode, d [2]string) {
		dirs = d
		w := nodes[1].worker()
		if w <= 0 { // never 0: that would signal the test's own group
			t.Error("node 1 has no worker")
			return
		}
		if err := syscall.Kill(w, syscall.SIGSTOP); err != nil {
			t.Error(err)
		}
		// Node 0 can finish one step at most now: its epoch's checkpoint
		// stays the last.
		ckpt, _ = os.ReadFile(filepath.Join(dirs[0], "ckpt", "last.ckpt"))
		worker0 = nodes[0].worker()
		interrupted = time.Now()
		nodes[0].cmd.Process.Signal(os.Interrupt)
	})
	// Bounded far below the collective's timeout: a hang fails here.
	select {
	case <-nodes[0].done:
	case <-time.After(90 * time.Second):
		t.Fatalf("node 0 had not exited 90 s after its interrupt\n%s", nodes[0].output())
	}
	out := nodes[0].output()
	if interrupted.IsZero() {
		t.Fatalf("node 0 never finished its second epoch: %v\n%s\nnode 1:\n%s", nodes[0].err, out, nodes[1].output())
	}
	t.Logf("node 0 exited %v after its interrupt", time.Since(interrupted).Round(100*time.Millisecond))
	if c := exitCode(nodes[0].err); c != exitInterrupted {
		t.Errorf("node 0 exited %d (%v), want %d\n%s", c, nodes[0].err, exitInterrupted, out)
	}
	if !strings.Contains(out, "while a peer rank was stalled: rank 0 waited") || !strings.Contains(out, "is kept") {
		t.Errorf("node 0 does not say a peer rank was stalled and its checkpoint is kept:\n%s", out)
	}
	if len(ckpt) == 0 {
		t.Fatal("node 0 had no checkpoint after its second epoch")
	}
	if now, err := os.ReadFile(filepath.Join(dirs[0], "ckpt", "last.ckpt")); err != nil || !bytes.Equal(now, ckpt) {
		t.Errorf("node 0's last checkpoint changed or went (%v)", err)
	}
	if worker0 <= 0 || syscall.Kill(worker0, 0) != syscall.ESRCH {
		t.Errorf("node 0's worker (pid %d) outlived it", worker0)
	}
}

// TestLostPeerIsPlain: of two nodes, node 1's worker is killed (SIGKILL)
// after node 0's second epoch. Node 0's output names rank 1 and has no
// Python traceback (gloo's), and node 1's memory line holds the plan to
// its worker's peak at exit, never to pipe's own process. Before, node 1
// compared the worker's plan with pipe's peak ("89.7% over").
func TestLostPeerIsPlain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	killed := false
	nodes := startPeers(t, ctx, "epoch done: epoch=2/", func(nodes [2]*peerNode, _ [2]string) {
		w := nodes[1].worker()
		killed = w > 0 && syscall.Kill(w, syscall.SIGKILL) == nil
	})
	for _, n := range nodes {
		<-n.done
	}
	out0, out1 := nodes[0].output(), nodes[1].output()
	if !killed {
		t.Fatalf("node 1's worker was not killed\n%s\nnode 1:\n%s", out0, out1)
	}
	if c := exitCode(nodes[0].err); c != exitErrors || !strings.Contains(out0, "rank 1 went away") {
		t.Errorf("node 0 exited %d without naming rank 1:\n%s", c, out0)
	}
	for i, out := range []string{out0, out1} {
		if strings.Contains(out, "Traceback") || strings.Contains(out, "File \"") {
			t.Errorf("node %d printed a Python traceback:\n%s", i, out)
		}
	}
	if !strings.Contains(out1, "peak resident memory was") || !strings.Contains(out1, "at its exit") || strings.Contains(out1, "VmHWM") {
		t.Errorf("node 1's summary does not hold the plan to its worker's peak at exit:\n%s", out1)
	}
}
