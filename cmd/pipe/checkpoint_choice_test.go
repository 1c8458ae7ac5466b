package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/run/folder"
)

// TestShortRunServedWhenNoOtherFits: pipe export passes a latest run cut
// short by --max-steps over only for a run whose weights fit the model:
// with no other run, or with a full run of the model before its layers
// were edited, it loads the short run, and warns that it was cut short.
func TestShortRunServedWhenNoOtherFits(t *testing.T) {
	fixedHost(t)
	dir, file := tiny(t, servePipe)
	t.Chdir(dir)
	export := func(want string) {
		t.Helper()
		code, stdout, stderr := runPipe(t, "", "export", "--onnx", filepath.Join(dir, "m.onnx"), file)
		if code != exitOK || !strings.Contains(stdout, "run "+want+": last.ckpt (step 2") ||
			!strings.Contains(stderr, "is of a run cut short by --max-steps 2 (step 2, 0 of 1 epoch done)") {
			t.Errorf("pipe export: exit %d, does not load %s with a warning:\n%s%s", code, want, stdout, stderr)
		}
	}
	smoke := func() string {
		t.Helper()
		if code, _, stderr := runPipe(t, "", "run", "--threads", "1", "--max-steps", "2", file); code != exitOK {
			t.Fatalf("smoke run: exit %d\n%s", code, stderr)
		}
		latest, _, err := folder.LatestRun(filepath.Join("out", "tiny"))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join("out", "tiny", folder.RunsFolder, filepath.Base(latest))
	}
	export(smoke())

	if code, _, stderr := runPipe(t, "", "run", "--threads", "1", file); code != exitOK {
		t.Fatalf("full run: exit %d\n%s", code, stderr)
	}
	edited := strings.Replace(servePipe, "flatten -> dense 3", "flatten -> dense 8 -> relu -> dense 3", 1)
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	export(smoke())
}
