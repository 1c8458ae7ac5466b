package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"pipe/cmd/pipe/internal/views"
	"pipe/run"
	"pipe/run/folder"
)

// cancelOn is an Env whose stderr cancels the run (as a Ctrl-C does)
// once it shows a line holding mark.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	mark   string
	cancel func()
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if c.cancel != nil && strings.Contains(c.buf.String(), c.mark) {
		c.cancel()
		c.cancel = nil
	}
	return len(p), nil
}

// interruptAt runs pipe with args and interrupts it when its output
// shows mark; it returns the exit code and the output.
func interruptAt(t *testing.T, mark string, args ...string) (int, string) {
	t.Helper()
	w := &cancelOn{mark: mark}
	old := runContext
	t.Cleanup(func() { runContext = old })
	runContext = func(*app) (context.Context, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		w.mu.Lock()
		w.cancel = cancel
		w.mu.Unlock()
		return ctx, cancel
	}
	var out bytes.Buffer
	code := Main(args, &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: w, Getenv: func(string) string { return "" }})
	runContext = old
	return code, w.buf.String()
}

// TestResumeHintReproducesTheRun: a run given --set and --batch,
// interrupted, prints a short command to continue; that command, run as
// printed, trains the run's epochs at the run's batch (before, it
// trained the file's: 2 epochs, not 3), saying it took them from the
// run's folder. Other overrides are refused, naming both, and nothing is
// trained; a flag given replaces the run's, said; --max-steps is each
// command's own.
func TestResumeHintReproducesTheRun(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, tinyPipe)
	ckdir := filepath.Join(dir, "ckpt")
	// 240 samples at batch 8: 30 steps an epoch.
	code, stderr := interruptAt(t, "epoch done", "run", "--checkpoint-dir", ckdir, "--set", "train.epochs=3", "--batch", "8", file)
	hint := regexp.MustCompile(`continue with: (pipe run [^\n]*)`).FindStringSubmatch(stderr)
	if code != exitInterrupted || hint == nil {
		t.Fatalf("exit %d, no command to continue:\n%s", code, stderr)
	}
	if want := "pipe run --resume --checkpoint-dir " + ckdir + " " + file; hint[1] != want {
		t.Errorf("the command to continue is\n%s\nwant\n%s", hint[1], want)
	}
	rec, err := folder.ReadSettings(ckdir)
	if err != nil || rec == nil || len(rec.Overrides) != 1 || rec.Flags["batch"] != "8" {
		t.Fatalf("the run's settings: %+v (%v)", rec, err)
	}

	// Other overrides are refused before anything is trained; a flag
	// given replaces the run's, and the resume's own checks hold it (a
	// step of another size is refused).
	before := mustRead(t, filepath.Join(ckdir, folder.LastCheckpoint))
	code, _, stderr = runPipe(t, "", "run", "--resume", "--checkpoint-dir", ckdir, "--set", "train.epochs=1", file)
	if code != exitErrors || !strings.Contains(stderr, "refusing to continue the run in "+ckdir) || !strings.Contains(stderr, "it had --set train.epochs=3, this command --set train.epochs=1") {
		t.Errorf("other overrides: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runPipe(t, "", "run", "--resume", "--checkpoint-dir", ckdir, "--batch", "16", file)
	if code != exitErrors || !strings.Contains(stderr, "replace the run's") || !strings.Contains(stderr, "--batch 16 for its 8") || !strings.Contains(stderr, "another step") {
		t.Errorf("another batch: exit %d\n%s", code, stderr)
	}
	if !bytes.Equal(before, mustRead(t, filepath.Join(ckdir, folder.LastCheckpoint))) {
		t.Fatal("a refused resume changed the checkpoint")
	}

	// --max-steps is the command's: a short continuation, then the rest.
	code, _, stderr = runPipe(t, "", "run", "--resume", "--checkpoint-dir", ckdir, "--max-steps", "40", file)
	if code != exitOK || !strings.Contains(stderr, "continuing with the run's own settings") || !strings.Contains(stderr, "--set train.epochs=3 --batch 8") {
		t.Fatalf("--max-steps 40: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runPipe(t, "", strings.Fields(hint[1])[1:]...)
	if code != exitOK {
		t.Fatalf("%s: exit %d\n%s", hint[1], code, stderr)
	}
	b := mustRead(t, filepath.Join(ckdir, "report.json"))
	if v := readJSON(t, b); v["steps"] != 90.0 || v["epochs"] != 3.0 {
		t.Errorf("the resumed run trained %v steps in %v epochs; the run's are 90 in 3", v["steps"], v["epochs"])
	}
}

// TestResumeWithoutARecordChecksTheOverrides: a run folder of an older
// pipe has no settings.json; a resume there with other overrides than
// its checkpoint's is refused before training, naming both (before, it
// trained, and said afterwards that the source had changed), while one
// started from that checkpoint elsewhere (--resume=PATH) is a new run
// and is only told.
func TestResumeWithoutARecordChecksTheOverrides(t *testing.T) {
	fixedHost(t)
	fakeBackend(t)
	dir, file := tiny(t, tinyPipe)
	ckdir := filepath.Join(dir, "ckpt")
	if code, _, stderr := runPipe(t, "", runArgs(dir, "--set", "train.epochs=3", "--max-steps", "5", file)...); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if err := os.Remove(filepath.Join(ckdir, folder.SettingsFile)); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runPipe(t, "", runArgs(dir, "--resume", file)...)
	if code != exitErrors || !strings.Contains(stderr, "the run was started with other overrides") ||
		!strings.Contains(stderr, "--set train.epochs=3") || !strings.Contains(stderr, "no --set") || strings.Contains(stderr, "source changed") {
		t.Errorf("resumed in place: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runPipe(t, "", "run", "--checkpoint-dir", filepath.Join(dir, "other"), "--resume="+filepath.Join(ckdir, folder.LastCheckpoint), file)
	if code != exitOK || !strings.Contains(stderr, "the overrides differ from the checkpoint's") {
		t.Errorf("a new run from the checkpoint: exit %d\n%s", code, stderr)
	}
}

// TestInterruptedOnNodesSaysEachNodesCommand: pipe's own run on two
// machines, interrupted, tells every node the whole command, its flags
// and settings with it (before, the hint left out --nnodes and the
// rest), quoted for a shell; one machine's says the short one.
func TestInterruptedOnNodesSaysEachNodesCommand(t *testing.T) {
	res := &run.Result{Position: run.Position{Epoch: 0, Step: 9}, SamplesTrained: 72, Checkpoint: "ck/last.ckpt"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1", "--master-port", "29400", "--batch", "8", "--set", "model.net.input=[1, 4, 4]", "--checkpoint-dir", "ck", "t.pipe"},
			"continue with: on every node, pipe run --resume --checkpoint-dir ck --node-rank RANK --master-addr 10.0.0.1 --master-port 29400 --batch 8 --nnodes 2 --set 'model.net.input=[1, 4, 4]' t.pipe (RANK the node's rank)"},
		{[]string{"--batch", "8", "--max-steps", "20", "--checkpoint-dir", "ck", "t.pipe"},
			"continue with: pipe run --resume --checkpoint-dir ck --max-steps 20 t.pipe\n"},
	} {
		a := &app{env: &Env{Getenv: func(string) string { return "" }}}
		fs := a.newFlags("run")
		f := newRunFlags(fs)
		files, err := a.parseFlags(fs, c.args)
		if err != nil {
			t.Fatal(err)
		}
		a.sets = f.over.sets
		a.parsedSets = nil
		f.settings = a.settings(fs)
		f.settings.Overrides = f.over.sets
		flags, own, every := f.again(fs, nil)
		var b strings.Builder
		views.Interrupted(&b, res, views.Again{CheckpointDir: *f.ckptDir, File: files[0], Flags: flags, Own: own, EveryNode: every})
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%v:\n%s\nwant\n%s", c.args, b.String(), c.want)
		}
	}
}
