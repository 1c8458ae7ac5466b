package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pipe/dataset/remote"
	"pipe/internal/s3test"
	"pipe/run/folder"
)

// startS3 starts the in-process S3 server and points pipe at it.
func startS3(t *testing.T) *s3test.Server {
	t.Helper()
	s, err := s3test.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("PIPE_REMOTE_BACKOFF_MS", "1")
	remote.Reset(-1)
	return s
}

// TestCheckpointDirOnS3: a job's run given --checkpoint-dir s3://...
// writes its checkpoints, job record and report to the prefix (every
// third request failing, retried); with the local folders gone, as a new
// pod has none, the job's next start continues from the prefix's
// checkpoint; another job given the prefix is refused with both ids and
// writes nothing there.
func TestCheckpointDirOnS3(t *testing.T) {
	fixedHost(t)
	s := startS3(t)
	dir, file := tiny(t, servePipe)
	t.Chdir(dir)
	start := func(env map[string]string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(append([]string{"run", "--threads", "1", "--checkpoint-dir", s.URL("team/ckpt/")}, append(args, file)...),
			&Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: envOf(env)})
		return code, out.String() + errb.String()
	}
	s.FailEvery.Store(3)
	job := map[string]string{"SLURM_JOB_ID": "101"}
	if code, out := start(job, "--max-steps", "2"); code != exitOK {
		t.Fatalf("the first start: exit %d\n%s", code, out)
	}
	keys := s.Keys("team/ckpt/")
	for _, k := range []string{"job", "last.ckpt", "report.json"} {
		if !slices.Contains(keys, "team/ckpt/"+k) {
			t.Errorf("the prefix holds %v, no %s", keys, k)
		}
	}
	if b, _ := s.Get("team/ckpt/job"); string(b) != "slurm-101\n" {
		t.Errorf("the job record reads %q", b)
	}
	if s.Failed.Load() == 0 {
		t.Error("no request failed: the retries were not exercised")
	}
	s.Reset()
	if err := os.RemoveAll("out"); err != nil {
		t.Fatal(err)
	}
	code, out := start(job, "--max-steps", "3")
	if code != exitOK || !strings.Contains(out, "continuing from the run's last checkpoint, "+s.URL("team/ckpt/last.ckpt")) {
		t.Fatalf("the job's next start: exit %d\n%s", code, out)
	}
	b, _ := s.Get("team/ckpt/report.json")
	rep := readJSON(t, b)
	from, _ := rep["resumed_from"].(map[string]any)
	if from == nil || from["step"].(float64) != 2 || rep["steps"].(float64) != 3 {
		t.Errorf("the prefix's report: resumed from %v, %v steps", rep["resumed_from"], rep["steps"])
	}
	last, _ := s.Get("team/ckpt/last.ckpt")
	code, out = start(map[string]string{"SLURM_JOB_ID": "303"}, "--max-steps", "4")
	if code != exitErrors || !strings.Contains(out, "slurm-101") || !strings.Contains(out, "slurm-303") {
		t.Errorf("another job at the prefix: exit %d\n%s", code, out)
	}
	if now, _ := s.Get("team/ckpt/last.ckpt"); !bytes.Equal(now, last) {
		t.Error("another job replaced the prefix's last.ckpt")
	}
	for _, k := range []string{s3test.AccessKey, s3test.SecretKey} {
		if strings.Contains(out, k) {
			t.Error("the output shows a key")
		}
	}
}

// TestCheckpointDirSchemesRefused: a run folder at a URL pipe cannot
// write is refused before anything runs, by pipe run (the flag, and
// train's checkpoint_dir), pipe check and pipe launch, and no local
// folder named after the scheme is made; gs:// without HMAC keys is
// refused by pipe run before training.
func TestCheckpointDirSchemesRefused(t *testing.T) {
	dir, file := tiny(t, servePipe)
	t.Chdir(dir)
	t.Setenv("GS_ACCESS_KEY_ID", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--checkpoint-dir", "http://h/ckpt", file}, "a local folder named \"http:\""},
		{[]string{"run", "--checkpoint-dir", "az://c/ckpt", file}, "s3:// and gs://"},
		{[]string{"run", "--report", "s3://b/r.json", file}, "take local paths"},
		{[]string{"run", "--max-steps", "1", "--checkpoint-dir", "gs://b/ckpt", file}, "GS_ACCESS_KEY_ID"},
		{[]string{"launch", "--slurm", "j.sbatch", file, "--", "--checkpoint-dir=ftp://h/x"}, "ftp://"},
	} {
		code, _, stderr := runPipe(t, "", c.args...)
		if code != exitErrors || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want %d and %q\n%s", c.args, code, exitErrors, c.want, stderr)
		}
	}
	withDir := filepath.Join(dir, "ckdir.pipe")
	src := strings.Replace(servePipe, "loss cross_entropy }", "loss cross_entropy  checkpoint_dir \"ftp://h/ckpt\" }", 1)
	if err := os.WriteFile(withDir, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"check", "run"} {
		code, _, stderr := runPipe(t, "", cmd, withDir)
		if code != exitErrors || !strings.Contains(stderr, "cannot write checkpoints to ftp://") {
			t.Errorf("pipe %s with checkpoint_dir ftp://: exit %d\n%s", cmd, code, stderr)
		}
	}
	for _, made := range []string{"http:", "az:", "gs:", "ftp:", "j.sbatch", filepath.Join("out", "tiny", "runs")} {
		if _, err := os.Stat(made); err == nil {
			t.Errorf("%s was made", made)
		}
	}
}

// TestPyTorchJobContainerRestartResumesFromS3: a PyTorchJob's container
// as the operator starts it (TestPyTorchJobContainerRestartContinues),
// with --checkpoint-dir on the in-process S3, stopped mid-run (SIGTERM);
// its local files are then removed, as a new pod has none, and the same
// command started again continues at the step the first stopped at,
// from the object store, and completes.
func TestPyTorchJobContainerRestartResumesFromS3(t *testing.T) {
	s := startS3(t)
	p := newPod(t, "pods3")
	dir := p.dir
	p.env = append(p.env, "PIPE_REMOTE_CACHE_DIR="+filepath.Join(dir, "cache"))
	p.flags = []string{"--checkpoint-dir", s.URL("pods/train")}
	step := p.stopAtEpoch3()
	if err := os.RemoveAll(filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	out, err := p.start("")
	if err != nil || !strings.Contains(out, "continuing from the run's last checkpoint, "+s.URL("pods/train/last.ckpt")+", of job pytorchjob-team-train") {
		t.Fatalf("the second start: %v\n%s", err, out)
	}
	b, ok := s.Get("pods/train/report.json")
	if !ok {
		t.Fatalf("no report at the prefix: %v", s.Keys(""))
	}
	rep := readJSON(t, b)
	from, _ := rep["resumed_from"].(map[string]any)
	if from == nil || int(from["step"].(float64)) != step || rep["steps"].(float64) != 320 || rep["status"] != "completed" || rep["run_id"] != "pytorchjob-team-train" {
		t.Errorf("resumed from %v (stopped at step %d); %v steps, %v, run %v", rep["resumed_from"], step, rep["steps"], rep["status"], rep["run_id"])
	}
	if job, _ := s.Get("pods/train/" + folder.JobFile); string(job) != "pytorchjob-team-train\n" {
		t.Errorf("the prefix's job record reads %q", job)
	}
	t.Logf("stopped at step %d; the new container continued there from s3:// to step %v", step, rep["steps"])
}
