package dataset

import (
	"encoding/csv"
	"errors"
	"fmt"
	"slices"
	"strings"

	"pipe/dataset/geotiff"
	"pipe/spec"
)

// SampleShape is the shape of one sample of source b as Open's XShape
// would give it, read from headers (an IDX header, a CSV's first row, an
// image's or a raster's header): nothing is decoded, so pipe plan can
// check the model's input against the data as cheaply as it counts it.
// Its errors are Open's for the same fault (a missing file, a header
// Open refuses), on the same field, with the same words: the plan
// refuses what the run would. The shape is nil, with no error, where
// it needs more than headers (a CSV's one-hot columns, a volume's or a
// zarr array's windows); then only the files' presence is checked
// where Open would check it first.
func SampleShape(b *spec.Source, opts ...Option) ([]int64, error) {
	if b == nil {
		return nil, errors.New("data: SampleShape needs a source spec")
	}
	c := newConfig(opts)
	switch {
	case b.IDX != nil:
		im, err := openIDXHeader(c, b.IDX.Images)
		if err != nil {
			return nil, blockErr(b, "images", err)
		}
		im.close()
		lb, err := openIDXHeader(c, b.IDX.Labels)
		if err != nil {
			return nil, blockErr(b, "labels", err)
		}
		lb.close()
		return idxShape(b, im.dims, lb.dims)
	case b.CSV != nil:
		return csvShape(b, c)
	case b.Images != nil:
		return imagesShape(b, c)
	case b.GeoTIFF != nil:
		return geotiff.SampleShape(b, c.geotiffOptions())
	case b.Synthetic != nil:
		if b.Synthetic.Samples < 1 || len(b.Synthetic.Shape) == 0 || prod(b.Synthetic.Shape) < 1 {
			return nil, blockErr(b, "shape", fmt.Errorf("synthetic source %s: needs samples ≥ 1 and a non-empty shape", b.Name))
		}
		return slices.Clone(b.Synthetic.Shape), nil
	}
	return nil, nil
}

// csvShape is a CSV source's features, from its first row (the header,
// or the first record's columns c1, c2, ...): nil when a categorical
// column's one-hot width needs every row, or when a column the source
// names is not there (Open says which).
func csvShape(b *spec.Source, c *config) ([]int64, error) {
	f, err := openFile(c, b.CSV.Path)
	if err != nil {
		return nil, blockErr(b, "path", err)
	}
	defer f.Close()
	if len(b.CSV.Categorical) > 0 {
		return nil, nil
	}
	cr := csv.NewReader(f)
	switch d, r := b.CSV.Delimiter, []rune(b.CSV.Delimiter); {
	case d == "":
	case d == `\t` || d == "tab":
		cr.Comma = '\t'
	case len(r) == 1 && r[0] != '"' && r[0] != '\r' && r[0] != '\n':
		cr.Comma = r[0]
	default:
		return nil, nil // Open refuses the delimiter
	}
	cr.FieldsPerRecord = -1
	rec, err := cr.Read()
	if err != nil {
		return nil, nil // Open words what is wrong with the file
	}
	names := make([]string, len(rec))
	for i, s := range rec {
		names[i] = strings.TrimSpace(s)
		if !b.CSV.Header {
			names[i] = fmt.Sprintf("c%d", i+1)
		}
	}
	if !slices.Contains(names, b.CSV.Label) {
		return nil, nil
	}
	if fs := b.CSV.Features; fs != nil {
		for _, nm := range fs {
			if !slices.Contains(names, nm) || nm == b.CSV.Label {
				return nil, nil
			}
		}
		return []int64{int64(len(fs))}, nil
	}
	return []int64{int64(len(names) - 1)}, nil
}

// imagesShape is an images source's [channels, height, width]: the
// resize, else the first image that decodes, as Open takes them.
func imagesShape(b *spec.Source, c *config) ([]int64, error) {
	ch := c.channels
	if b.Images.Channels != nil && !c.channelsSet {
		ch = int(*b.Images.Channels)
	}
	if ch != 1 && ch != 3 {
		return nil, blockErr(b, "channels", fmt.Errorf("images source %s: %d channels: images are read with 1 or 3", b.Name, ch))
	}
	var items []imageItem
	var skipped []string
	var err error
	if b.Images.Masks != "" {
		items, skipped, err = listSegmentation(c, b.Images.Path, b.Images.Masks)
	} else {
		items, _, err = listClasses(c, b.Images.Path)
	}
	if err != nil {
		return nil, blockErr(b, "path", err)
	}
	if b.Images.Strict && len(skipped) > 0 {
		return nil, blockErr(b, "masks", errors.New(skipped[0]))
	}
	if v := b.Images.Resize; v != nil {
		return []int64{int64(ch), v[0], v[1]}, nil
	}
	for _, it := range items {
		cfg, err := decodeConfig(c, it.path)
		if err == nil {
			return []int64{int64(ch), int64(cfg.Height), int64(cfg.Width)}, nil
		}
		if b.Images.Strict {
			return nil, blockErr(b, "path", err)
		}
	}
	return nil, nil
}
