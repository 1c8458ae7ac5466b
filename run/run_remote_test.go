package run

import (
	"os"
	"path/filepath"
	"pipe/run/folder"
	"testing"

	"pipe/dataset/remote"
	"pipe/internal/s3test"
	"pipe/spec"
)

// TestPlaceRemote: placing a run at an s3:// prefix empties its staging
// folder and fills it with the prefix's job record and checkpoints (a
// stale local last.ckpt the prefix lacks goes); another rank gets a
// folder of its own; a prefix recording another job is refused; a
// scheme pipe cannot write is refused before any folder is made.
func TestPlaceRemote(t *testing.T) {
	s, err := s3test.Start(map[string][]byte{"ck/job": []byte("slurm-1\n"), "ck/best.ckpt": []byte("best")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	remote.Reset(-1)
	base := t.TempDir()
	prog := &spec.Program{Name: "p"}
	u := s.URL("ck") + "/"
	stage := StagingFolder(PipelineFolder(base, "p"), s.URL("ck"))
	if err := os.MkdirAll(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stage, folder.LastCheckpoint), []byte("an older run's"), 0o644)
	os.WriteFile(filepath.Join(stage, "report.json"), []byte("{}"), 0o644)
	job := folder.Job{ID: "slurm-1", From: "SLURM_JOB_ID=1"}
	pl, err := PlaceRun(prog, base, Where{Dir: u, Job: job})
	if err != nil || pl.Dir != stage || pl.Remote != s.URL("ck") {
		t.Fatalf("placed %+v, %v", pl, err)
	}
	for name, want := range map[string]string{folder.JobFile: "slurm-1\n", folder.BestCheckpoint: "best", folder.LastCheckpoint: "", "report.json": ""} {
		b, err := os.ReadFile(filepath.Join(stage, name))
		if got := string(b); got != want || (want == "") != (err != nil) {
			t.Errorf("%s reads %q (%v), want %q", name, got, err, want)
		}
	}
	other, err := PlaceRun(prog, base, Where{Dir: u, Job: job, Rank: 1})
	if err != nil || other.Dir == stage {
		t.Errorf("rank 1 placed at %s (%v), want a folder of its own", other.Dir, err)
	}
	if _, err := PlaceRun(prog, base, Where{Dir: u, Job: folder.Job{ID: "slurm-2", From: "SLURM_JOB_ID=2"}}); err == nil {
		t.Error("another job's prefix was not refused")
	}
	if _, err := PlaceRun(prog, base, Where{Dir: "http://h/ck"}); err == nil {
		t.Error("http:// was not refused")
	}
	if _, err := os.Stat(filepath.Join(PipelineFolder(base, "p"), RemoteFolder)); err != nil {
		t.Fatal(err)
	}
	if es, _ := os.ReadDir(filepath.Join(PipelineFolder(base, "p"), RemoteFolder)); len(es) != 2 {
		t.Errorf("%d staging folders, want rank 0's and rank 1's", len(es))
	}
}
