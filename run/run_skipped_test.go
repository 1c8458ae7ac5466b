package run_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/run"
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

	res, ds := j.run(t, t.Context(), nil, run.Hooks{})
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

// TestImagePredictionsNameTheirFiles: a CSV of predictions over an images
// source names each image's file beside its index.
func TestImagePredictionsNameTheirFiles(t *testing.T) {
	src := `pipeline pills
source shelf images {
  path   "pills"
  resize 8x8
}
model m {
  input [3, 8, 8]
  flatten -> dense 2
}
train { epochs 1  batch 4  optimizer sgd lr 0.1  loss cross_entropy }
predict { source shelf  write "pred.csv" }
`
	j := newJob(t, src)
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{"a", "b"} {
		for _, name := range []string{"1.png", "2.png"} {
			writeFile(t, filepath.Join(j.dir, "pills", class, name), buf.String())
		}
	}
	if _, ds := j.run(t, t.Context(), nil, run.Hooks{}); ds.HasErrors() {
		t.Fatal(ds)
	}
	out, err := os.ReadFile(filepath.Join(j.dir, "pred.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !strings.HasPrefix(lines[0], "index,file,class,name,probability") || len(lines) != 5 {
		t.Fatalf("%s", out)
	}
	if !strings.Contains(lines[1], filepath.Join("pills", "a", "1.png")) || !strings.Contains(lines[4], filepath.Join("pills", "b", "2.png")) {
		t.Errorf("%s", out)
	}
}
