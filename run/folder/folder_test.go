package folder_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"pipe/run/folder"
)

// meta stands for a run's checkpoint metadata: more fields than an
// Identity, which reads its own by name.
type meta struct {
	Pipeline, Model, File, FileAbs, Structure, OptimizerKind string
	Step                                                     int64
}

var tiny = folder.Identity{Pipeline: "tiny", Model: "lin", File: "tiny.pipe", Structure: "s1", OptimizerKind: "adam"}

// writeCkpt writes a checkpoint of m with one tensor into dir/name.
func writeCkpt(t *testing.T, dir, name string, m meta) string {
	t.Helper()
	path := filepath.Join(dir, name)
	err := folder.WriteFileAtomic(path, func(w io.Writer) error {
		return folder.EncodeCheckpoint(w, &m, [][]float32{{1, 2, 3}})
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// TestTwoRunsInOneFolder: while a run holds a folder's lock a second is
// refused, named by the first's pid; once it lets go the folder is free.
func TestTwoRunsInOneFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	a, b := &folder.Folder{Dir: dir}, &folder.Folder{Dir: dir}
	if err := a.Lock("a.pipe"); err != nil {
		t.Fatal(err)
	}
	err := b.Lock("b.pipe")
	if !errors.Is(err, folder.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), "a.pipe") {
		t.Fatalf("a second run in a held folder: %v", err)
	}
	if !folder.Busy(filepath.Join(dir, folder.LockFile)) {
		t.Error("a held folder is not busy")
	}
	a.Release()
	if folder.Busy(filepath.Join(dir, folder.LockFile)) {
		t.Error("a released folder is busy")
	}
	if err := b.Lock("b.pipe"); err != nil {
		t.Fatalf("after the first run let go: %v", err)
	}
	b.Release()
}

// TestAStaleLockIsTakenOver: a lock file left by a process that ended,
// however it ended, holds nobody: the next run takes it and says it is
// the holder.
func TestAStaleLockIsTakenOver(t *testing.T) {
	if os.Getenv("FOLDER_HOLD") != "" {
		return // the helper's own run of this test: TestMain held the lock
	}
	dir := t.TempDir()
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "FOLDER_HOLD="+dir)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "held" {
		holder.Process.Kill()
		t.Fatalf("the helper said %q", line)
	}
	f := &folder.Folder{Dir: dir}
	if err := f.Lock("late.pipe"); !errors.Is(err, folder.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", holder.Process.Pid)) {
		t.Errorf("while the helper holds it: %v", err)
	}
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	path := filepath.Join(dir, folder.LockFile)
	if !strings.Contains(folder.Holder(path), fmt.Sprintf("pid %d", holder.Process.Pid)) {
		t.Fatalf("the killed holder's file says %q: the test shows nothing", folder.Holder(path))
	}
	if err := f.Lock("late.pipe"); err != nil {
		t.Fatalf("a stale lock was not taken over: %v", err)
	}
	defer f.Release()
	if who := folder.Holder(path); !strings.Contains(who, fmt.Sprintf("pid %d,", os.Getpid())) {
		t.Errorf("the taken lock says %q", who)
	}
}

// TestMain is, under FOLDER_HOLD, a process that holds that folder's
// run lock until it is killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FOLDER_HOLD"); dir != "" {
		if err := (&folder.Folder{Dir: dir}).Lock("holder.pipe"); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("held")
		select {}
	}
	os.Exit(m.Run())
}

// TestAJobKeepsItsFolder: a folder that records a job is refused to
// another job, naming both, and given to its own and to a run of none.
func TestAJobKeepsItsFolder(t *testing.T) {
	dir := t.TempDir()
	a := folder.Job{ID: "slurm-12", From: "SLURM_JOB_ID=12"}
	if err := folder.RecordJob(dir, a); err != nil {
		t.Fatal(err)
	}
	if got, err := folder.ReadJob(dir); got != "slurm-12" || err != nil {
		t.Fatalf("the record reads %q, %v", got, err)
	}
	b := folder.Job{ID: "slurm-13", From: "SLURM_JOB_ID=13"}
	err := folder.CheckJob(dir, b)
	if !errors.Is(err, folder.ErrOtherJob) || !strings.Contains(err.Error(), "slurm-12") || !strings.Contains(err.Error(), "SLURM_JOB_ID=13") {
		t.Errorf("another job's folder: %v", err)
	}
	if err := folder.CheckJob(dir, a); err != nil {
		t.Errorf("its own job: %v", err)
	}
	if err := folder.CheckJob(dir, folder.Job{}); err != nil {
		t.Errorf("a run of no job: %v", err)
	}
	if err := folder.CheckJob(t.TempDir(), b); err != nil {
		t.Errorf("a folder of no job: %v", err)
	}
	for _, id := range []string{"", "-x", "a/b", strings.Repeat("a", 129)} {
		if folder.CheckJobID(id) == nil {
			t.Errorf("run id %q was taken", id)
		}
	}
	if err := folder.CheckJobID("slurm-12_7"); err != nil {
		t.Error(err)
	}
}

// TestClaim: a folder of another pipeline's checkpoints is refused; this
// pipeline's earlier run's are stale, and clearing them leaves its
// last.ckpt alone, which the first checkpoint replaces.
func TestClaim(t *testing.T) {
	mine := meta{Pipeline: "tiny", Model: "lin", File: "tiny.pipe", Structure: "s1", OptimizerKind: "adam", Step: 7}
	t.Run("empty", func(t *testing.T) {
		f := &folder.Folder{Dir: t.TempDir()}
		if stale, m := f.Claim(tiny, false); stale || m != nil || f.Stale() {
			t.Errorf("an empty folder: stale %v, %v", stale, m)
		}
	})
	for what, other := range map[string]meta{
		"another pipeline's":            {Pipeline: "other", Model: "lin", Structure: "s1", OptimizerKind: "adam"},
		"of another model":              {Pipeline: "tiny", Model: "big", Structure: "s1", OptimizerKind: "adam"},
		"another optimizer":             {Pipeline: "tiny", Model: "lin", Structure: "s1", OptimizerKind: "sgd"},
		"another pipeline's (its file)": {Pipeline: "tiny", Model: "lin", FileAbs: "/elsewhere/tiny.pipe"},
	} {
		t.Run(what, func(t *testing.T) {
			dir := t.TempDir()
			path := writeCkpt(t, dir, folder.BestCheckpoint, other)
			before, _ := os.ReadFile(path)
			f := &folder.Folder{Dir: dir}
			id := tiny
			id.FileAbs = "/here/tiny.pipe"
			stale, m := f.Claim(id, false)
			if m == nil || stale || !strings.Contains(m.Fact, path) || !strings.Contains(m.Summary, strings.TrimSuffix(what, " (its file)")) {
				t.Fatalf("claimed: stale %v, %+v", stale, m)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("the refused claim changed the checkpoint")
			}
		})
	}
	t.Run("an earlier run's", func(t *testing.T) {
		dir := t.TempDir()
		last := writeCkpt(t, dir, folder.LastCheckpoint, mine)
		writeCkpt(t, dir, folder.BestCheckpoint, mine)
		for _, n := range []string{"epoch-001.ckpt", folder.SettingsFile, folder.JobFile, "report.json"} {
			touch(t, filepath.Join(dir, n))
		}
		f := &folder.Folder{Dir: dir}
		if stale, m := f.Claim(tiny, false); !stale || m != nil || !f.Stale() {
			t.Fatalf("stale %v, %v", stale, m)
		}
		if err := f.ClearStale(); err != nil || f.Stale() {
			t.Fatalf("clear: %v (stale %v)", err, f.Stale())
		}
		var left []string
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			left = append(left, e.Name())
		}
		if !slices.Equal(left, []string{"last.ckpt", "report.json"}) {
			t.Errorf("after clearing the folder holds %v, want the earlier last.ckpt (and what is no checkpoint's)", left)
		}
		var got meta
		if _, err := folder.ReadCheckpoint(last, &got); err != nil || got.Step != 7 {
			t.Errorf("the earlier last.ckpt: step %d, %v", got.Step, err)
		}
	})
	t.Run("a job's", func(t *testing.T) {
		dir := t.TempDir()
		writeCkpt(t, dir, folder.LastCheckpoint, mine)
		touch(t, filepath.Join(dir, folder.JobFile))
		mirror := &fakeMirror{epochs: []string{"epoch-002.ckpt"}}
		f := &folder.Folder{Dir: dir, Job: folder.Job{ID: "slurm-12"}, Mirror: mirror}
		f.Claim(tiny, false)
		if err := f.ClearStale(); err != nil {
			t.Fatal(err)
		}
		if !exists(filepath.Join(dir, folder.JobFile)) {
			t.Error("clearing a job's folder removed its job record")
		}
		want := []string{"epoch-002.ckpt", folder.BestCheckpoint, folder.SettingsFile}
		if !slices.Equal(mirror.deleted, want) {
			t.Errorf("the mirror lost %v, want %v", mirror.deleted, want)
		}
	})
	t.Run("an unreadable one", func(t *testing.T) {
		dir := t.TempDir()
		touch(t, filepath.Join(dir, folder.LastCheckpoint))
		f := &folder.Folder{Dir: dir}
		if stale, m := f.Claim(tiny, false); !stale || m != nil {
			t.Errorf("a folder whose checkpoint says nothing of whose: stale %v, %v", stale, m)
		}
	})
}

type fakeMirror struct{ epochs, deleted []string }

func (m *fakeMirror) Epochs() ([]string, error) { return m.epochs, nil }
func (m *fakeMirror) Delete(names ...string) error {
	m.deleted = append(m.deleted, names...)
	return nil
}

// TestRestartedWorldDecides: a claim left to the launcher continues the
// folder's last.ckpt when the world was restarted, and otherwise makes
// the earlier run's checkpoints stale, as a claim would have.
func TestRestartedWorldDecides(t *testing.T) {
	mine := meta{Pipeline: "tiny", Model: "lin", Structure: "s1", OptimizerKind: "adam"}
	for _, n := range []int{0, 2} {
		dir := t.TempDir()
		writeCkpt(t, dir, folder.LastCheckpoint, mine)
		f := &folder.Folder{Dir: dir}
		if stale, m := f.Claim(tiny, true); stale || m != nil || f.Stale() {
			t.Fatalf("a deferred claim: stale %v, %v", stale, m)
		}
		resume, stale := f.Restarted(n)
		if resume != (n > 0) || stale != (n == 0) || f.Stale() != (n == 0) {
			t.Errorf("restarts %d: resume %v, stale %v", n, resume, stale)
		}
	}
	// A folder without last.ckpt starts afresh whatever the count.
	f := &folder.Folder{Dir: t.TempDir()}
	if resume, _ := f.Restarted(3); resume {
		t.Error("a restarted world resumed a folder without last.ckpt")
	}
}

// TestATornCheckpointIsNeverRead: a checkpoint cut short, damaged or
// not a checkpoint at all is refused, saying which; a write that fails
// half way leaves the file before it whole and no temporary file.
func TestATornCheckpointIsNeverRead(t *testing.T) {
	dir := t.TempDir()
	path := writeCkpt(t, dir, folder.LastCheckpoint, meta{Pipeline: "tiny", Step: 3})
	good, _ := os.ReadFile(path)
	var m meta
	if data, err := folder.ReadCheckpoint(path, &m); err != nil || m.Step != 3 || len(data) != 12 {
		t.Fatalf("the whole file: step %d, %d bytes of data, %v", m.Step, len(data), err)
	}
	cases := map[string][]byte{
		"truncated": good[:len(good)/2],
		"corrupt":   append(append([]byte(nil), good[:len(good)-5]...), good[len(good)-5]^0xff, 0, 0, 0, 0),
		"not a pipe checkpoint": []byte("hello, world, this is not a checkpoint at all; it is longer than a header is, " +
			"so only the magic number can tell"),
		"the header says": append(append([]byte(nil), good...), 0),
	}
	for want, b := range cases {
		bad := filepath.Join(dir, "bad.ckpt")
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := folder.ReadCheckpoint(bad, &m)
		if !errors.Is(err, folder.ErrBadCheckpoint) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	full := func(w io.Writer) io.Writer { return failAfter{w, 10} }
	_, err := (&folder.Folder{Dir: dir}).Write(folder.LastCheckpoint, func(w io.Writer) error {
		return folder.EncodeCheckpoint(w, &meta{Pipeline: "tiny", Step: 4}, [][]float32{make([]float32, 1<<19)})
	}, full)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the failed write: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, good) {
		t.Error("a failed write changed the checkpoint")
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(tmp) > 0 {
		t.Errorf("a failed write left %v", tmp)
	}
}

// TestRewriteKeepsTheMode: a file written over keeps its permission
// bits (pipe fmt -w of a file only its owner may read); a new one is
// 0644, not CreateTemp's 0600.
func TestRewriteKeepsTheMode(t *testing.T) {
	dir := t.TempDir()
	mine, fresh := filepath.Join(dir, "mine.pipe"), filepath.Join(dir, "new.pipe")
	if err := os.WriteFile(mine, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }
	for _, path := range []string{mine, fresh} {
		if err := folder.WriteFileAtomic(path, write); err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string]os.FileMode{mine: 0o600, fresh: 0o644} {
		st, err := os.Stat(path)
		if b, _ := os.ReadFile(path); err != nil || st.Mode().Perm() != want || string(b) != "new" {
			t.Errorf("%s: %v, %q (%v), want %v", filepath.Base(path), st.Mode().Perm(), b, err, want)
		}
	}
}

// failAfter takes n bytes, then fails as a full disk does.
type failAfter struct {
	w io.Writer
	n int
}

func (f failAfter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		return 0, syscall.ENOSPC
	}
	return f.w.Write(b)
}

// TestLatest: the first checkpoint of a run placed under a pipeline's
// folder makes it the latest; a folder given as it is never does; latest
// as a file reads back the same, and one naming a removed folder says so.
func TestLatest(t *testing.T) {
	root := t.TempDir()
	if _, _, err := folder.LatestRun(root); !errors.Is(err, folder.ErrNoRun) {
		t.Errorf("no run: %v", err)
	}
	dir := filepath.Join(root, folder.RunsFolder, "20240101-000000")
	f := &folder.Folder{Dir: dir, Root: root}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if f.Written() {
		t.Fatal("a fresh folder was written")
	}
	if err := f.Wrote(); err != nil || !f.Written() {
		t.Fatal(err)
	}
	if got, legacy, err := folder.LatestRun(root); got != dir || legacy || err != nil {
		t.Errorf("latest: %s, %v, %v", got, legacy, err)
	}
	if st, err := os.Lstat(filepath.Join(root, folder.LatestName)); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("latest is not a symbolic link: %v", err)
	}
	given := &folder.Folder{Dir: filepath.Join(root, "given")}
	if err := given.Wrote(); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := folder.LatestRun(root); got != dir {
		t.Errorf("a folder given as it is became the latest: %s", got)
	}

	os.Remove(filepath.Join(root, folder.LatestName))
	touch(t, filepath.Join(root, folder.LatestName))
	os.WriteFile(filepath.Join(root, folder.LatestName), []byte(filepath.Join(folder.RunsFolder, "20240101-000000")+"\n"), 0o644)
	if got, legacy, err := folder.LatestRun(root); err != nil || legacy || got != dir {
		t.Errorf("latest as a file: %s, %v, %v", got, legacy, err)
	}
	os.RemoveAll(dir)
	if _, _, err := folder.LatestRun(root); !errors.Is(err, folder.ErrNoRun) || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("latest naming a removed run: %v", err)
	}

	old := t.TempDir()
	writeCkpt(t, filepath.Join(old, folder.LegacyFolder), folder.LastCheckpoint, meta{Pipeline: "tiny"})
	if got, legacy, err := folder.LatestRun(old); !legacy || err != nil || got != filepath.Join(old, folder.LegacyFolder) {
		t.Errorf("the old layout: %s, %v, %v", got, legacy, err)
	}
}

// TestResumesHere: a resume continues the folder's own checkpoints only
// when it names none elsewhere.
func TestResumesHere(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	f := &folder.Folder{Dir: dir}
	last := filepath.Join(dir, folder.LastCheckpoint)
	touch(t, last)
	for at, want := range map[string]bool{"": true, dir: true, last: true, other: false, filepath.Join(other, "x.ckpt"): false} {
		if got := f.ResumesHere(at); got != want {
			t.Errorf("resume from %q: here %v", at, got)
		}
	}
	if got := f.ResumeFrom(""); got != last {
		t.Errorf("resume from the folder reads %s", got)
	}
	if got := f.ResumeFrom(other); got != filepath.Join(other, folder.LastCheckpoint) {
		t.Errorf("resume from a folder reads %s", got)
	}
}

// TestFolderKnowsNoModel: the folder's rules need no engine, plan or run
// loop: the package imports nothing of pipe's.
func TestFolderKnowsNoModel(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "pipe/run/folder").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "pipe/") && dep != "pipe/run/folder" {
			t.Errorf("pipe/run/folder depends on %s", dep)
		}
	}
}
