package dataset

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"pipe/dataset/remote"
	"pipe/spec"
)

// Volume sources: a volume kind (a multi-page TIFF stack, read through
// GDAL, volume_gdal.go) and a zarr kind (a Zarr v2 array, zarr.go). Both
// read the whole array into memory as float32 [C, D, H, W] and cut
// windows from it, with an optional target array of the same extent.
// Inputs are standardised per channel over the volume; a regression
// target's statistics go to the executor, as a geotiff's do.
// Details: docs/design/dataset-sources.md.

type volumeDataset struct {
	x          []float32
	c, d, h, w int
	y          []float32
	cy         int
	win, step  [3]int
	origins    [][3]int
	norm       Norm
	tnorm      Norm
	tstd       bool
}

// volumeReader reads a whole array or stack: data in C order and its
// shape, [D, H, W] or [C, D, H, W].
type volumeReader func(path string) ([]float32, []int, error)

func openZarrSource(b *spec.Source, c *config) (Dataset, error) {
	return openVolumeWith(b, c, "zarr", func(p string) ([]float32, []int, error) {
		a, err := ReadZarr(p)
		if err != nil {
			return nil, nil, err
		}
		return a.Data, a.Shape, nil
	})
}

func openVolumeWith(b *spec.Source, c *config, kind string, read volumeReader) (Dataset, error) {
	fail := func(field, format string, args ...any) (Dataset, error) {
		return nil, blockErr(b, field, fmt.Errorf("%s source %s: %s", kind, b.Name, fmt.Sprintf(format, args...)))
	}
	path := b.Volume.Path
	x, shape, err := read(c.path(path))
	if err != nil {
		return fail("path", "%v", err)
	}
	v := &volumeDataset{x: x}
	shape = squeeze(shape)
	switch len(shape) {
	case 3:
		v.c, v.d, v.h, v.w = 1, shape[0], shape[1], shape[2]
	case 4:
		v.c, v.d, v.h, v.w = shape[0], shape[1], shape[2], shape[3]
	default:
		return fail("path", "%s has shape %v; a volume is [D, H, W] or [C, D, H, W]", path, shape)
	}
	if t := b.Volume.Target; t != "" {
		y, ys, err := read(c.path(t))
		if err != nil {
			return fail("target", "%v", err)
		}
		if ys = squeeze(ys); len(ys) == 3 {
			ys = append([]int{1}, ys...)
		}
		if len(ys) != 4 || ys[1] != v.d || ys[2] != v.h || ys[3] != v.w {
			return fail("target", "the target %s has shape %v; it needs the inputs' depth, height and width, [D, H, W] or [C, D, H, W] with D, H, W = %d, %d, %d", t, ys, v.d, v.h, v.w)
		}
		v.y, v.cy = y, ys[0]
		v.tnorm = channelStats(y, v.cy)
		v.tstd = b.Volume.TargetNormalize == "" || b.Volume.TargetNormalize == "standard"
	}
	v.win, v.step = [3]int{v.d, v.h, v.w}, [3]int{v.d, v.h, v.w}
	if wv := b.Volume.Window; wv != nil {
		if len(wv) != 3 {
			return fail("window", "window %v has %d extents; write [depth, height, width]", wv, len(wv))
		}
		for i, e := range wv {
			v.win[i], v.step[i] = int(e), int(e)
		}
		if s := b.Volume.Stride; s != nil {
			if len(s) != 3 {
				return fail("window", "stride %v has %d extents; write [depth, height, width]", s, len(s))
			}
			for i, e := range s {
				v.step[i] = int(e)
			}
		}
	}
	ext := [3]int{v.d, v.h, v.w}
	for i := range ext {
		if v.win[i] < 1 || v.win[i] > ext[i] || v.step[i] < 1 {
			return fail("window", "window %v does not fit the volume's %dx%dx%d (depth x height x width); use at most [%d, %d, %d]",
				v.win, v.d, v.h, v.w, v.d, v.h, v.w)
		}
	}
	for z := 0; z+v.win[0] <= v.d; z += v.step[0] {
		for r := 0; r+v.win[1] <= v.h; r += v.step[1] {
			for q := 0; q+v.win[2] <= v.w; q += v.step[2] {
				v.origins = append(v.origins, [3]int{z, r, q})
			}
		}
	}
	if mode := b.Volume.Normalize; mode == "" || mode == "standard" {
		v.norm = channelStats(v.x, v.c)
		per := v.d * v.h * v.w
		for ch := 0; ch < v.c; ch++ {
			m, s := float32(v.norm.Mean[ch]), float32(1/v.norm.Std[ch])
			xs := v.x[ch*per : (ch+1)*per]
			for i := range xs {
				xs[i] = (xs[i] - m) * s
			}
		}
	}
	return v, nil
}

// squeeze drops leading axes of extent 1 beyond four: OME-Zarr's
// images are [T, C, Z, Y, X], one time point a volume.
func squeeze(shape []int) []int {
	for len(shape) > 4 && shape[0] == 1 {
		shape = shape[1:]
	}
	return shape
}

// channelStats is the mean and standard deviation of each channel's
// block of a [C, ...] array (a deviation of 0 becomes 1).
func channelStats(a []float32, c int) Norm {
	per := len(a) / c
	n := Norm{Mean: make([]float64, c), Std: make([]float64, c)}
	for ch := 0; ch < c; ch++ {
		var s, ss float64
		for _, v := range a[ch*per : (ch+1)*per] {
			s += float64(v)
		}
		m := s / float64(per)
		for _, v := range a[ch*per : (ch+1)*per] {
			ss += (float64(v) - m) * (float64(v) - m)
		}
		sd := math.Sqrt(ss / float64(per))
		if sd == 0 || math.IsNaN(sd) {
			sd = 1
		}
		n.Mean[ch], n.Std[ch] = m, sd
	}
	return n
}

func (v *volumeDataset) Len() int { return len(v.origins) }
func (v *volumeDataset) XShape() []int64 {
	return []int64{int64(v.c), int64(v.win[0]), int64(v.win[1]), int64(v.win[2])}
}
func (v *volumeDataset) YShape() []int64 {
	return []int64{int64(v.cy), int64(v.win[0]), int64(v.win[1]), int64(v.win[2])}
}
func (v *volumeDataset) Classes() int  { return 0 }
func (v *volumeDataset) HasMask() bool { return false }
func (v *volumeDataset) Norm() Norm    { return v.norm }
func (v *volumeDataset) Close() error  { return nil }

// TargetNorm implements TargetNormalized.
func (v *volumeDataset) TargetNorm() (Norm, bool) { return v.tnorm, v.tstd }

// Read copies window i of the inputs into x and of the targets into y.
func (v *volumeDataset) Read(i int, x, y, _ []float32) error {
	if i < 0 || i >= len(v.origins) {
		return fmt.Errorf("volume window %d out of range [0, %d)", i, len(v.origins))
	}
	o := v.origins[i]
	v.cut(v.x, v.c, o, x)
	if v.cy > 0 {
		v.cut(v.y, v.cy, o, y)
	}
	return nil
}

// cut copies the window at origin o of the [c, D, H, W] array a into dst.
func (v *volumeDataset) cut(a []float32, c int, o [3]int, dst []float32) {
	k := 0
	for ch := 0; ch < c; ch++ {
		for z := o[0]; z < o[0]+v.win[0]; z++ {
			for r := o[1]; r < o[1]+v.win[1]; r++ {
				at := ((ch*v.d+z)*v.h+r)*v.w + o[2]
				k += copy(dst[k:k+v.win[2]], a[at:at+v.win[2]])
			}
		}
	}
}

// ReadVolume reads a multi-page TIFF stack (through GDAL) or, for a
// folder holding .zarray, a Zarr v2 array, as float32 in C order with its
// shape: [C, D, H, W] for a stack, the array's own for Zarr.
func ReadVolume(path string) ([]float32, []int, error) {
	if _, err := os.Stat(filepath.Join(path, ".zarray")); err == nil || remote.IsURL(path) {
		a, err := ReadZarr(path)
		if err != nil {
			return nil, nil, err
		}
		return a.Data, a.Shape, nil
	}
	return readStack(path)
}

// volumeResident is what a volume or zarr source holds: its input and
// target arrays, whole, as float32.
func volumeResident(b *spec.Source, c *config) (Resident, error) {
	var n int64
	for _, p := range []string{b.Volume.Path, b.Volume.Target} {
		if p == "" {
			continue
		}
		shape, err := volumeShape(b, c, p)
		if err != nil {
			return Resident{}, err
		}
		k := int64(1)
		for _, d := range shape {
			k *= int64(d)
		}
		n += k
	}
	return Resident{Bytes: 4 * n, What: fmt.Sprintf("the volume's %d input and target values as float32", n)}, nil
}

// volumeShape is the shape of the array or stack at path p (as written)
// of a volume or zarr source: a Zarr array's from its .zarray, a TIFF
// stack's from reading it.
func volumeShape(b *spec.Source, c *config, p string) ([]int, error) {
	p = c.path(p)
	if b.Kind == spec.KindZarr {
		raw, err := os.ReadFile(filepath.Join(p, ".zarray"))
		if err != nil {
			return nil, err
		}
		var h zarrHeader
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, err
		}
		return h.Shape, nil
	}
	_, s, err := readStack(p)
	return s, err
}
