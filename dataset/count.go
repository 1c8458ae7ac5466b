package dataset

import (
	"fmt"
	"io"
	"math"

	"pipe/spec"
)

// Count is how many samples a source holds, as Count reads it without
// loading them: All in the source, Train in its training part (the split's
// round(frac·n), as SplitByFraction cuts; All without a split). Exact says
// the figures are the ones opening the source will give; a raster's are
// upper bounds (opening drops tiles with no valid target pixel, and a
// split by blocks sets some tiles aside).
type Count struct {
	All, Train int
	Exact      bool
}

// CountSamples counts a source's samples cheaply, for the planner:
// the header of an IDX labels file, the rows of a CSV file, the files of
// an images folder, a synthetic source's samples field, a raster's tiles.
// Paths resolve as Open resolves them.
func CountSamples(b *spec.Source, opts ...Option) (Count, error) {
	if b == nil {
		return Count{}, fmt.Errorf("data: CountSamples needs a source spec")
	}
	c := newConfig(opts)
	var n int
	exact := true
	var err error
	switch {
	case b.Synthetic != nil:
		n = int(b.Synthetic.Samples)
	case b.IDX != nil:
		n, err = countIDX(c, b.IDX.Labels)
	case b.CSV != nil:
		n, err = countCSV(c, b.CSV.Path, b.CSV.Header)
	case b.Images != nil:
		root, masks := b.Images.Path, b.Images.Masks
		var items []imageItem
		if masks != "" {
			items, _, err = listSegmentation(c, root, masks)
		} else {
			items, _, err = listClasses(c, root)
		}
		n = len(items)
	case b.GeoTIFF != nil:
		n, err = countTiles(b, c)
		exact = false
	case b.Volume != nil:
		var ds Dataset
		if ds, err = Open(b, opts...); err == nil {
			n = ds.Len()
			ds.Close()
		}
	default:
		return Count{}, fmt.Errorf("source %s: unknown kind %q", b.Name, b.Kind)
	}
	if err != nil {
		return Count{}, err
	}
	ct := Count{All: n, Train: n, Exact: exact}
	if frac, _, ok := splitOf(b, c); ok {
		k := int(math.Round(frac * float64(n)))
		if n >= 2 {
			k = min(max(k, 1), n-1)
		}
		ct.Train = k
		if b.Split.Blocks != nil {
			ct.Exact = false
		}
	}
	return ct, nil
}

// countIDX reads the item count from an IDX labels file's header.
func countIDX(c *config, p string) (int, error) {
	h, err := openIDXHeader(c, p)
	if err != nil {
		return 0, err
	}
	defer h.close()
	return h.dims[0], nil
}

// countCSV counts a CSV file's non-empty lines, less the header.
func countCSV(c *config, p string, header bool) (int, error) {
	f, err := openFile(c, p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<16)
	var n int
	var inLine bool
	for {
		k, err := f.Read(buf)
		for _, ch := range buf[:k] {
			switch ch {
			case '\n':
				if inLine {
					n++
				}
				inLine = false
			case '\r', ' ', '\t':
			default:
				inLine = true
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
	}
	if inLine {
		n++
	}
	if header && n > 0 {
		n--
	}
	return n, nil
}
