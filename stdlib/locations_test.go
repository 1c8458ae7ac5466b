package stdlib

import (
	"strings"
	"testing"

	"pipe/lang"
	"pipe/spec"
)

// TestCheckLocations: a path written as a URL passes when its kind reads
// that scheme, and is refused on its field's line otherwise: a scheme
// pipe serves nowhere, images over https:// (no listing), a TIFF stack
// at a URL, a checkpoint_dir pipe cannot write, predictions to a URL.
func TestCheckLocations(t *testing.T) {
	cases := []struct {
		src  string
		want string // "" for no error; else a piece of the error, on line 2
	}{
		{"source s idx {\n images \"s3://b/x-idx3\"  labels \"gs://b/y-idx1\" }\n", ""},
		{"source s csv {\n path \"https://h/t.csv\"  label y }\n", ""},
		{"source s images {\n path \"s3://b/pets\" }\n", ""},
		{"source s zarr {\n path \"gs://b/v.zarr\" }\n", ""},
		{"source s images {\n path \"ftp://h/pets\" }\n", "cannot read ftp:// URLs"},
		{"source s csv {\n path \"az://c/t.csv\"  label y }\n", "not az://"},
		{"source s images {\n path \"https://h/pets\" }\n", "s3:// and gs:// URLs, not https://"},
		{"source s volume {\n path \"s3://b/stack.tif\" }\n", "TIFF stack"},
		{"train {\n checkpoint_dir \"http://h/ckpt\"  epochs 1 }\n", "a local folder named \"http:\""},
		{"train {\n checkpoint_dir \"s3://b/ckpt\"  epochs 1 }\n", ""},
		{"train {\n checkpoint_dir \"C:\\\\runs\"  epochs 1 }\n", ""},
		{"predict {\n write \"s3://b/out.tif\" }\n", "written to a local path"},
	}
	for _, c := range cases {
		f, ds := lang.Parse("t.pipe", []byte(c.src))
		p, cds := lang.Check(f, Schema())
		for _, d := range append(ds, cds...).Errs() {
			if d.Code != "no-model" && d.Code != "no-source" { // a train block alone
				t.Fatalf("%q: %v", c.src, d)
			}
		}
		dec, _ := Decode(p)
		got := CheckLocations(dec.Spec)
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%q: %v", c.src, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0].Summary+" "+got[0].Detail, c.want) || got[0].Subject.Start.Line != 2):
			t.Errorf("%q: %v, want one error on line 2 with %q", c.src, got, c.want)
		}
	}
}

// TestEveryPathKindReadsURLs: every source kind with a file field reads
// some URL (or the check says which kinds do).
func TestEveryPathKindReadsURLs(t *testing.T) {
	for _, kind := range sourceKind {
		s := spec.NewSource("s", kind)
		if s.Synthetic != nil {
			continue
		}
		if why := SourceReadsURL(kind, "s3"); why != "" {
			t.Errorf("%s: %s", kind, why)
		}
	}
	if why := SourceReadsURL("tfrecords", "s3"); !strings.Contains(why, "idx, images") {
		t.Errorf("an unknown kind: %q", why)
	}
}
