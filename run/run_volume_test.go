package run_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"pipe/dataset"
	"pipe/run"
)

// TestVolumeWindowMismatch: a zarr source whose windows do not match the
// model's input says which window to write.
func TestVolumeWindowMismatch(t *testing.T) {
	j := newJob(t, `source s zarr {
  path   "x.zarr"
  target "x.zarr"
  window [2, 4, 4]
}
model m {
  input [1, 3, 4, 4]
  conv3d 1 k1
}
train {
  epochs 1
  batch  2
  loss   mse
}
`)
	if err := dataset.WriteZarr(filepath.Join(j.dir, "x.zarr"), []int{6, 4, 4}, []int{3, 4, 4}, "|u1", "zlib", make([]float32, 96)); err != nil {
		t.Fatal(err)
	}
	_, ds := j.run(t, context.Background(), nil, run.Hooks{})
	d := findDiag(t, ds, run.CodeShape)
	if !strings.Contains(d.Detail, "Write window [3, 4, 4] in source s, or input [1, 2, 4, 4] in the model.") {
		t.Errorf("detail %q", d.Detail)
	}
}
