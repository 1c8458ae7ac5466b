package dataset

import (
	"fmt"
	"image"

	"pipe/spec"
)

// Resident is what an opened source keeps in memory while a run trains,
// for the planner's account of the process: the samples as the source
// holds them (not as batches, which the loader's buffers count), and
// what reading them keeps besides.
type Resident struct {
	Bytes int64
	// What says what the bytes are, for the plan's reasons.
	What string
}

// ResidentBytes is what source b keeps in memory once Open has
// read it, from headers and counts alone (nothing is decoded). inElems is
// the model's input size per sample, which is what a CSV source's rows
// become. Each kind's figure is its Open's layout:
//
//   - idx: the images and the labels as unsigned bytes, one per pixel
//     and per label (idxDataset);
//   - images: the decoded cache, ch·h·w pixels (and h·w mask pixels) per
//     image as bytes, as many images as the cache budget holds;
//   - csv: the normalised features and the targets, n × (inElems + 1)
//     float32 values;
//   - geotiff: the scene's validity mask (a byte per pixel), the warped
//     target (4 bytes per pixel) when there is one, and GDAL's block
//     cache, which holds at most the raster's own bytes (every band's
//     every block, read once each);
//   - synthetic: the class centres, classes × inElems float32 values;
//   - volume, zarr: the whole input array and target array as float32
//     (a Zarr array's size from its .zarray; a TIFF stack's from GDAL).
func ResidentBytes(b *spec.Source, inElems int64, opts ...Option) (Resident, error) {
	if b == nil {
		return Resident{}, fmt.Errorf("data: ResidentBytes needs a source spec")
	}
	c := newConfig(opts)
	switch {
	case b.IDX != nil:
		h, err := openIDXHeader(c, b.IDX.Images)
		if err != nil {
			return Resident{}, err
		}
		h.close()
		n, per := int64(h.dims[0]), int64(1)
		for _, d := range h.dims[1:] {
			per *= int64(d)
		}
		return Resident{Bytes: n*per + n, What: fmt.Sprintf("%d images of %d bytes and their labels, as bytes", n, per)}, nil
	case b.CSV != nil:
		n, err := countCSV(c, b.CSV.Path, b.CSV.Header)
		if err != nil {
			return Resident{}, err
		}
		rows := int64(n)
		return Resident{Bytes: rows * (inElems + 1) * 4, What: fmt.Sprintf("%d rows of %d features and a target, as float32", rows, inElems)}, nil
	case b.Images != nil:
		root, masks := b.Images.Path, b.Images.Masks
		var items []imageItem
		var err error
		if masks != "" {
			items, _, err = listSegmentation(c, root, masks)
		} else {
			items, _, err = listClasses(c, root)
		}
		if err != nil {
			return Resident{}, err
		}
		ch := int64(c.channels)
		if b.Images.Channels != nil && !c.channelsSet {
			ch = *b.Images.Channels
		}
		var h, w int64
		if v := b.Images.Resize; len(v) == 2 {
			h, w = v[0], v[1]
		} else {
			for _, it := range items {
				var cfg image.Config
				if cfg, err = decodeConfig(c, it.path); err == nil {
					h, w = int64(cfg.Height), int64(cfg.Width)
					break
				}
			}
		}
		per := ch * h * w
		if masks != "" {
			per += h * w
		}
		n := int64(len(items))
		if per > 0 {
			n = min(n, c.cacheBytes/per)
		}
		return Resident{Bytes: n * per, What: fmt.Sprintf("%d decoded images of %d bytes", n, per)}, nil
	case b.GeoTIFF != nil:
		return rasterResident(b, c)
	case b.Volume != nil:
		return volumeResident(b, c)
	case b.Synthetic != nil:
		classes := int64(1)
		if v := b.Synthetic.Classes; v > 0 {
			classes = v
		}
		return Resident{Bytes: classes * inElems * 4, What: fmt.Sprintf("%d class centres", classes)}, nil
	}
	return Resident{}, fmt.Errorf("source %s: unknown kind %q", b.Name, b.Kind)
}
