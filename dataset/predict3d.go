package dataset

import (
	"fmt"
	"math"
	"sync"

	"pipe/spec"
)

// Predicting over a volume: the 3-D counterpart of predict.go. Windows3
// cuts a volume into overlapping windows the size of the model's input,
// Volume.At makes them a Dataset for the loader, a Blender3 accumulates
// the model's outputs weighed by the cosine ramp of predict.go along all
// three axes, and the result is written as a Zarr array.

// Volume is implemented by the volume and zarr sources: their extent,
// the window their samples have, and the windows at any origins.
type Volume interface {
	Dataset
	// Extent is the volume's depth, height and width; Window a sample's.
	Extent() [3]int
	Window() [3]int
	// At returns the windows at the given origins [z, y, x] (inside the
	// volume) as a Dataset without targets.
	At(origins [][3]int) Dataset
}

// Extent implements Volume.
func (v *volumeDataset) Extent() [3]int { return [3]int{v.d, v.h, v.w} }

// Window implements Volume.
func (v *volumeDataset) Window() [3]int { return v.win }

// At implements Volume.
func (v *volumeDataset) At(origins [][3]int) Dataset {
	w := *v
	w.origins, w.y, w.cy = origins, nil, 0
	return &w
}

// Windows3 returns the origins of windows of extent win covering a
// volume of extent ext, neighbours overlapping by overlap[i] voxels along
// axis i (at least: the last window of an axis is moved back to end at
// the edge), in depth-, row-, then column-major order.
func Windows3(ext, win, overlap [3]int) [][3]int {
	var axes [3][]int
	for i := range axes {
		if ext[i] < win[i] || win[i] < 1 {
			return nil
		}
		axes[i] = starts(ext[i], win[i], overlap[i])
	}
	var out [][3]int
	for _, z := range axes[0] {
		for _, y := range axes[1] {
			for _, x := range axes[2] {
				out = append(out, [3]int{z, y, x})
			}
		}
	}
	return out
}

// Blender3 accumulates overlapping window predictions into one volume of
// bands × depth × height × width. It is safe for concurrent Add calls.
type Blender3 struct {
	ext   [3]int
	bands int
	mu    sync.Mutex
	acc   []float32
	wsum  []float32
	r     *Blender // for its ramps
}

// NewBlender3 returns an empty blender for a volume of extent ext with
// bands output channels.
func NewBlender3(ext [3]int, bands int) *Blender3 {
	n := ext[0] * ext[1] * ext[2]
	return &Blender3{ext: ext, bands: bands, acc: make([]float32, bands*n), wsum: make([]float32, n), r: NewBlender(0, 0, 0)}
}

// Add accumulates the prediction of the window of extent win at origin o,
// bands × win (channel-major, as the model's output for one sample).
func (b *Blender3) Add(o, win [3]int, pred []float32) error {
	per := win[0] * win[1] * win[2]
	if len(pred) < b.bands*per {
		return fmt.Errorf("blender: the prediction holds %d values, a %v window of %d channels needs %d", len(pred), win, b.bands, b.bands*per)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	rz, ry, rx := b.r.ramp(win[0]), b.r.ramp(win[1]), b.r.ramp(win[2])
	n := b.ext[0] * b.ext[1] * b.ext[2]
	for z := range win[0] {
		for y := range win[1] {
			for x := range win[2] {
				gz, gy, gx := o[0]+z, o[1]+y, o[2]+x
				if gz >= b.ext[0] || gy >= b.ext[1] || gx >= b.ext[2] {
					continue
				}
				wt := rz[z] * ry[y] * rx[x]
				p := (gz*b.ext[1]+gy)*b.ext[2] + gx
				q := (z*win[1]+y)*win[2] + x
				b.wsum[p] += wt
				for k := range b.bands {
					b.acc[k*n+p] += wt * pred[k*per+q]
				}
			}
		}
	}
	return nil
}

// Result returns the blended volume, bands × depth × height × width;
// voxels no window covered are NaN. It divides in place, so the blender
// holds no third copy (PredictBytes counts its two buffers); Add must not
// be called after it.
func (b *Blender3) Result() []float32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.wsum)
	for k := range b.bands {
		for p := range n {
			if b.wsum[p] == 0 {
				b.acc[k*n+p] = float32(math.NaN())
			} else {
				b.acc[k*n+p] /= b.wsum[p]
			}
		}
	}
	return b.acc
}

// PredictBytes is what predicting over source b holds besides the
// model and the source: for a volume or zarr source, the blender's sum
// of the outputs (outChannels per voxel) and of the weights (one per
// voxel), float32; nothing for other kinds, whose prediction buffers are
// not counted.
func PredictBytes(b *spec.Source, outChannels int64, opts ...Option) (Resident, error) {
	if b.Volume == nil {
		return Resident{}, nil
	}
	c := newConfig(opts)
	shape, err := volumeShape(b, c, b.Volume.Path)
	if err != nil {
		return Resident{}, err
	}
	n := int64(1)
	for _, d := range shape[len(shape)-3:] {
		n *= int64(d)
	}
	return Resident{Bytes: 4 * (outChannels + 1) * n, What: fmt.Sprintf("the blended prediction, %d channels and a weight over %d voxels, as float32", outChannels, n)}, nil
}
