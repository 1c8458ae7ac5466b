package run

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"pipe/dataset"
	"pipe/spec"
)

// predictVolume predicts over a whole volume with overlapping windows the
// size of the model's input, blended, and writes a Zarr array at path.
func (r *runner) predictVolume(ctx context.Context, vol dataset.Volume, src *spec.Source, path string, overlap float64, batch int) (*Prediction, error) {
	in, out := r.graph.Input, r.model.OutShape()
	win := vol.Window()
	if len(in) != 4 || int(in[1]) != win[0] || int(in[2]) != win[1] || int(in[3]) != win[2] || in[0] != vol.XShape()[0] {
		return nil, fmt.Errorf("model %s takes %s, but source %s gives windows %v", r.mspec.Name, shapeString(in), src.Name, vol.XShape())
	}
	if len(out) != 4 || !slices.Equal(out[1:], in[1:]) {
		return nil, fmt.Errorf("a prediction over a volume needs an output per voxel, [K, %d, %d, %d]; model %s outputs %s", in[1], in[2], in[3], r.mspec.Name, shapeString(out))
	}
	ext := vol.Extent()
	var ov [3]int
	for i := range ov {
		ov[i] = int(math.Round(overlap * float64(win[i])))
	}
	origins := dataset.Windows3(ext, win, ov)
	bands := int(out[0])
	blend := dataset.NewBlender3(ext, bands)
	err := r.eachOutput(ctx, vol.At(origins), batch, int(numel(out)), func(i int, y []float32) error {
		return blend.Add(origins[i], win, y)
	})
	if err != nil {
		return nil, err
	}
	pred := blend.Result()
	if s := r.data.scaling; s != nil {
		s.restore(pred, 1, len(pred)) // back to the target's units
	}
	shape := []int{bands, ext[0], ext[1], ext[2]}
	chunks := []int{1, win[0], win[1], win[2]}
	// gzip: zstd's encoder holds about 13 MB of tables and windows
	// (measured on the example), gzip's one.
	if err := dataset.WriteZarr(path, shape, chunks, "<f4", "gzip", pred); err != nil {
		return nil, err
	}
	return &Prediction{Source: src.Name, Path: path, Format: "zarr", Samples: len(origins)}, nil
}

// isZarrPath says whether predict's write names a Zarr array (a folder):
// its name ends in .zarr, or it is a Zarr array already.
func isZarrPath(p string) bool {
	if strings.HasSuffix(strings.TrimRight(p, "/"), ".zarr") {
		return true
	}
	_, err := os.Stat(filepath.Join(p, ".zarray"))
	return err == nil
}
