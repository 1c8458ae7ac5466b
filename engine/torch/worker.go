package torch

import (
	"bufio"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Package is the worker's Python package (pipe_torch/), embedded in the
// binary and written into a private folder when a worker starts.
//
//go:embed pipe_torch/*.py
var Package embed.FS

// PackageName is the package's import name: a Python that imports it
// (bench/torch_step.py) finds it in the folder WriteScript writes to.
const PackageName = "pipe_torch"

// WriteScript writes the worker's package into dir and returns the
// package's folder.
func WriteScript(dir string) (string, error) {
	sub, err := fs.Sub(Package, PackageName)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, PackageName)
	return path, os.CopyFS(path, sub)
}

// MinTorch is the oldest torch the worker runs on (Debian 12's).
var MinTorch = [3]int{1, 13, 0}

// startTimeout bounds a worker's start: Python, import torch, the hello.
var startTimeout = 3 * time.Minute

// worker is one Python process driving one device.
type worker struct {
	rank   int // global rank
	python string
	cmd    *osexec.Cmd
	stdin  io.WriteCloser
	dir    string
	log    hclog.Logger

	replies chan response
	exited  chan struct{}
	// exitedAt is when the process was reaped, set before exited closes:
	// of several dead ranks, the first to go is the cause.
	exitedAt time.Time
	waitErr  error
	stderr   *tail
	// pipePeak is pipe's peak resident memory just after the worker's
	// exec, which the kernel's figure of the worker's peak starts at
	// (exitMaxRSS).
	pipePeak int64

	// outstanding are the commands sent whose replies are not read yet,
	// oldest first.
	outstanding []sent
	// steps counts the optimizer steps sent; a command belongs to step
	// steps+1 when it is sent (queue.go's Results waits by it).
	steps     int64
	hello     Info
	dead      error
	cleanOnce sync.Once
	mu        sync.Mutex // guards stdin writes against kill
	// stamp makes send note when each command left (profile.go).
	stamp bool
}

// sent is a command on its way: what it was and what it holds.
type sent struct {
	cmd  string
	slot int       // the input slot it reads, -1 for none
	n    int       // its samples, for a train command
	step int64     // the optimizer step it is part of, from 1
	at   time.Time // when it was sent, while profiling
}

// tail keeps the last lines a worker wrote to stderr.
type tail struct {
	mu    sync.Mutex
	lines []string
	max   int
}

func (t *tail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, s)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// startWorker starts python on the worker script and waits for its hello.
func startWorker(python string, rank int, env []string, log hclog.Logger) (*worker, error) {
	if python == "" {
		python = "python3"
	}
	exe, err := osexec.LookPath(python)
	if err != nil {
		return nil, &StartError{Python: python, Reason: "not found", Err: err}
	}
	sweepOnce.Do(func() { sweepStale(os.TempDir()) })
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", dirPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	if _, err := WriteScript(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// -m finds the package in the working folder, which Python puts first
	// on its path unless PYTHONSAFEPATH says otherwise.
	cmd := osexec.Command(exe, "-u", "-m", PackageName, "--worker")
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "PYTHONSAFEPATH=")
	cmd.Dir = dir
	setProcAttr(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	w := &worker{rank: rank, python: python, cmd: cmd, stdin: stdin, dir: dir, log: log.Named(fmt.Sprintf("torch.rank%d", rank)),
		replies: make(chan response, 64), exited: make(chan struct{}), stderr: &tail{max: 40}}
	oomBefore := oomKills()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, &StartError{Python: python, Reason: "cannot be started", Err: err}
	}
	w.pipePeak = selfPeak()
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if msg, ok := rendezvousProgress(line); ok {
				w.log.Warn(msg) // a rank is missing: the user sees who and where
				continue
			}
			w.stderr.add(line)
			w.log.Debug(line)
		}
	}()
	go func() {
		defer readers.Done()
		defer close(w.replies)
		rd := bufio.NewReaderSize(stdout, 1<<16)
		for {
			line, err := rd.ReadBytes('\n')
			if len(line) > 0 {
				var r response
				if jerr := json.Unmarshal(line, &r); jerr != nil {
					r = response{failure: failure{Kind: kindError, Error: fmt.Sprintf("unreadable reply from the worker: %v: %.200q", jerr, line)}}
				}
				r.raw = line
				w.replies <- r
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		readers.Wait() // the pipes are drained before Wait closes them
		w.waitErr = cmd.Wait()
		w.exitedAt = time.Now()
		// The folder holds the worker's script and is its working folder:
		// once the process is gone nothing needs it, whether or not the
		// model is ever closed.
		w.cleanup()
		close(w.exited)
	}()

	// The hello: versions, or why torch cannot be imported.
	select {
	case r, ok := <-w.replies:
		if !ok {
			<-w.exited
			w.cleanup()
			return nil, exitedEarly(python, w.exitError(), w.stderr.String(), oomBefore)
		}
		if !r.OK {
			w.kill()
			if r.Kind == kindNoTorch {
				return nil, &StartError{Python: python, Reason: "cannot import torch", Err: errors.New(r.Error), NoTorch: true}
			}
			return nil, &StartError{Python: python, Reason: "failed to start", Err: errors.New(r.Error), Stderr: w.stderr.String()}
		}
		if err := json.Unmarshal(r.raw, &w.hello); err != nil {
			w.kill()
			return nil, &StartError{Python: python, Reason: "answered unreadably", Err: err}
		}
	case <-time.After(startTimeout):
		w.kill()
		return nil, &StartError{Python: python, Reason: fmt.Sprintf("did not start within %v", startTimeout), Stderr: w.stderr.String()}
	}
	if w.hello.Protocol != protocolVersion {
		w.kill()
		return nil, &StartError{Python: python, Reason: fmt.Sprintf("speaks protocol %d; this pipe speaks %d", w.hello.Protocol, protocolVersion)}
	}
	if !versionAtLeast(w.hello.Torch, MinTorch) {
		w.kill()
		return nil, &StartError{Python: python, Reason: fmt.Sprintf("has torch %s; pipe needs %d.%d or later", w.hello.Torch, MinTorch[0], MinTorch[1]),
			OldTorch: true}
	}
	return w, nil
}

// exitError describes how the process ended.
func (w *worker) exitError() error {
	if w.waitErr != nil {
		return w.waitErr
	}
	return errors.New("exit status 0")
}

// send writes one command; its reply is read later, in order.
func (w *worker) send(req request, slot, n int) error {
	return w.sendAs(req, req.command(), slot, n)
}

// sendAs is send with the name the reply is filed under.
func (w *worker) sendAs(req request, name string, slot, n int) error {
	if w.dead != nil {
		return w.dead
	}
	b, err := json.Marshal(envelope{Cmd: req.command(), Args: req})
	if err != nil {
		return fmt.Errorf("torch: encoding the %s command: %w", req.command(), err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	_, err = w.stdin.Write(b)
	w.mu.Unlock()
	if err != nil {
		return w.died()
	}
	s := sent{cmd: name, slot: slot, n: n, step: w.steps + 1}
	switch name {
	case "step", "train+step":
		w.steps++
	case "train_steps":
		// It belongs to its last step: Results(false) leaves it in flight.
		w.steps += int64(len(req.(trainStepsRequest).Steps))
		s.step = w.steps
	}
	if w.stamp {
		s.at = time.Now()
	}
	w.outstanding = append(w.outstanding, s)
	return nil
}

// died returns the error for a worker that is gone, once it has exited.
func (w *worker) died() error {
	if w.dead != nil {
		return w.dead
	}
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		w.kill()
		<-w.exited
	}
	w.dead = &WorkerError{Rank: w.rank, PID: w.cmd.Process.Pid, Err: w.exitError(), Stderr: w.stderr.String()}
	return w.dead
}

// kill ends the process at once.
func (w *worker) kill() {
	w.mu.Lock()
	if w.cmd.Process != nil {
		_ = killGroup(w.cmd)
	}
	w.mu.Unlock()
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
	}
	w.cleanup()
}

// close asks the worker to quit and waits a little for it, then kills it.
func (w *worker) close() {
	if w.dead == nil {
		b, _ := json.Marshal(envelope{Cmd: "quit", Args: quitRequest{}})
		w.mu.Lock()
		_, _ = w.stdin.Write(append(b, '\n'))
		w.stdin.Close()
		w.mu.Unlock()
		select {
		case <-w.exited:
			w.cleanup()
			return
		case <-time.After(5 * time.Second):
		}
	}
	w.kill()
}

// cleanup removes the worker's folder, once: when the process exits, or
// when it is killed or closed, whichever comes first.
func (w *worker) cleanup() {
	w.cleanOnce.Do(func() { os.RemoveAll(w.dir) })
}

// dirPrefix starts the name of a worker's folder in the temporary folder;
// the pid of the pipe that made it follows, then a random part.
const dirPrefix = "pipe-torch-"

// sweepOnce runs sweepStale once a process, before its first worker.
var sweepOnce sync.Once

// sweepStale removes the worker folders in tmp that a pipe no longer
// running left: a pipe killed outright (a second Ctrl-C, SIGKILL) runs
// no cleanup, and its workers die with it (Pdeathsig). A folder whose
// pipe still runs, or whose pid cannot be read, is kept.
func sweepStale(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), dirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
	}
}

// versionAtLeast compares a version such as "2.11.0+cu130" or "1.13.0a0".
func versionAtLeast(v string, want [3]int) bool {
	var got [3]int
	parts := strings.SplitN(strings.SplitN(v, "+", 2)[0], ".", 4)
	for i := 0; i < 3 && i < len(parts); i++ {
		n := 0
		for _, c := range parts[i] {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		got[i] = n
	}
	for i := range 3 {
		if got[i] != want[i] {
			return got[i] > want[i]
		}
	}
	return true
}

// rendezvousPrefix marks the worker's progress lines while ranks are
// missing (pipe_torch/rendezvous.py).
const rendezvousPrefix = "PIPE-RENDEZVOUS "

// rendezvousProgress reads one progress line into a message for people.
func rendezvousProgress(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, rendezvousPrefix)
	if !ok {
		return "", false
	}
	var p struct {
		Rank     int    `json:"rank"`
		At       string `json:"at"`
		Present  []int  `json:"present"`
		Missing  []int  `json:"missing"`
		Waited   int    `json:"waited_s"`
		TimeoutS int    `json:"timeout_s"`
	}
	if err := json.Unmarshal([]byte(rest), &p); err != nil {
		return "", false
	}
	if len(p.Present) == 0 {
		return fmt.Sprintf("rank %d is waiting for rank 0 at %s (%d s of %d s)", p.Rank, p.At, p.Waited, p.TimeoutS), true
	}
	return fmt.Sprintf("rank %d is waiting at %s for rank(s) %s; present: %s (%d s of %d s)", p.Rank, p.At,
		ints(p.Missing), ints(p.Present), p.Waited, p.TimeoutS), true
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
