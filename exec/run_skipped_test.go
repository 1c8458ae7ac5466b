package exec_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"strings"
	"testing"

	"pipe/exec"
	"pipe/lang/diag"
)

// An images source with strict false leaves out the files it cannot
// decode; the run says so, at the strict field, naming them.
func TestRunWarnsAboutSkippedImages(t *testing.T) {
	src := `pipeline pills
source shelf images {
  path   "pills"
  resize 8x8
  strict false
}
model m {
  input [3, 8, 8]
  flatten -> dense 2
}
train { epochs 1  batch 4  optimizer sgd lr 0.1  loss cross_entropy }
`
	j := newJob(t, src)
	var buf bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	img.Set(1, 1, color.White)
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{"a", "b"} {
		for _, name := range []string{"1.png", "2.png", "3.png"} {
			writeFile(t, filepath.Join(j.dir, "pills", class, name), buf.String())
		}
	}
	writeFile(t, filepath.Join(j.dir, "pills", "b", "broken.png"), buf.String()[:buf.Len()/2])

	res, ds := j.run(t, t.Context(), nil, exec.Hooks{})
	if ds.HasErrors() {
		t.Fatalf("run failed:\n%v", ds)
	}
	if res.Status != "completed" {
		t.Fatalf("status %s", res.Status)
	}
	d := findDiag(t, ds, "data")
	if d.Severity != diag.Warning || !strings.Contains(d.Summary, "skipped 1 unreadable file") ||
		!strings.Contains(d.Detail, "broken.png") || d.Subject == nil || d.Subject.Start.Line != lineOf(src, "strict false") {
		t.Fatalf("diagnostic %+v (subject %v)", d, d.Subject)
	}
}
