//go:build cgo

package geotiff

import (
	"fmt"

	"pipe/spec"
)

// Band targets: target_bands makes some bands of the scene the per-pixel
// targets (band-to-band translation), and downsample makes the inputs a
// coarser copy of the tile (super-resolution). The target bands follow
// the input bands in d.bands, so the scan that validates the scene and
// computes each band's statistics covers them: a pixel is valid where
// every input and target band has data, and the targets are scaled per
// band as normalize scales the inputs (so they are not target_normalize's
// and are scored in those units).

// bandTargets reads target_bands and downsample.
func (d *Dataset) bandTargets(b *spec.Source, nBands int) error {
	d.down = 1
	tb := b.GeoTIFF.TargetBands
	if v := b.GeoTIFF.Downsample; v != nil {
		d.down = int(*v)
		if tb == nil {
			tb = append([]int(nil), d.bands...) // super-resolution of the input bands
		}
	}
	if tb == nil {
		return nil
	}
	if b.GeoTIFF.Target != "" {
		return blockErr(b, "target_bands", fmt.Errorf("a source has either a target raster or target_bands, not both"))
	}
	for _, bn := range tb {
		if bn < 1 || bn > nBands {
			return blockErr(b, "target_bands", fmt.Errorf("%s: band %d does not exist (the file has bands 1 to %d)", d.path, bn, nBands))
		}
	}
	d.nIn, d.nT = len(d.bands), len(tb)
	d.bands = append(d.bands, tb...) // bands0 and nodata follow
	return nil
}

// Factor implements data.SuperResolution.
func (d *Dataset) Factor() int { return max(d.down, 1) }

// ReadInputs implements data.SuperResolution: the input bands of win at the
// scene's resolution (0 where it has no data).
func (d *Dataset) ReadInputs(win Window, x []float32) error {
	plane := win.W * win.H
	if len(x) < d.nIn*plane {
		return fmt.Errorf("geotiff: x holds %d values, the window needs %d", len(x), d.nIn*plane)
	}
	if d.nT == 0 {
		_, err := d.readWindow(win, x, nil, nil)
		return err
	}
	all := make([]float32, (d.nIn+d.nT)*plane)
	if _, err := d.readWindow(win, all, nil, nil); err != nil {
		return err
	}
	copy(x, all[:d.nIn*plane])
	return nil
}

// readBandTargets reads a window's input and target bands: x the inputs
// (averaged over down×down blocks), y the targets at full resolution,
// mask 1 where every band has data, for each target band.
func (d *Dataset) readBandTargets(win Window, x, y, mask []float32) error {
	nIn, nT, f := d.nIn, d.nT, d.down
	plane := win.W * win.H
	all := make([]float32, (nIn+nT)*plane)
	valid, err := d.readWindow(win, all, nil, nil)
	if err != nil {
		return err
	}
	ho, wo := win.H/f, win.W/f
	if len(x) < nIn*ho*wo {
		return fmt.Errorf("geotiff: x holds %d values, the window needs %d", len(x), nIn*ho*wo)
	}
	inv := 1 / float32(f*f)
	for k := range nIn {
		src := all[k*plane : (k+1)*plane]
		for r := range ho {
			for c := range wo {
				var s float32
				for dy := range f {
					row := src[(r*f+dy)*win.W+c*f:]
					for dx := range f {
						s += row[dx]
					}
				}
				x[k*ho*wo+r*wo+c] = s * inv
			}
		}
	}
	if len(y) >= nT*plane {
		copy(y, all[nIn*plane:])
	}
	if len(mask) >= nT*plane {
		for k := range nT {
			for p := range plane {
				mask[k*plane+p] = b2f(valid[p])
			}
		}
	}
	return nil
}
