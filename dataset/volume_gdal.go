//go:build cgo

package dataset

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/airbusgeo/godal"

	"pipe/dataset/geotiff"
	"pipe/spec"
)

func openVolumeSource(b *spec.Source, c *config) (Dataset, error) {
	return openVolumeWith(b, c, "volume", readTIFFStack)
}

func readStack(path string) ([]float32, []int, error) { return readTIFFStack(path) }

// readTIFFStack reads a multi-page TIFF through GDAL, which shows a
// TIFF's pages beyond the first as subdatasets (GTIFF_DIR:n:path): pages
// are the depth, each page's bands the channels, [C, D, H, W]. A
// one-page TIFF is a volume of depth 1. Every page must have the first
// one's size and band count; 8 and 16-bit and float pages read alike.
func readTIFFStack(path string) ([]float32, []int, error) {
	geotiff.InitGDAL()
	ds, err := godal.Open(path, godal.RasterOnly(), godal.SkipWarnings)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var pages []string
	type page struct {
		n    int
		name string
	}
	var sub []page
	for k, v := range ds.Metadatas(godal.Domain("SUBDATASETS")) {
		if !strings.HasPrefix(k, "SUBDATASET_") || !strings.HasSuffix(k, "_NAME") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(k, "SUBDATASET_"), "_NAME"))
		if err == nil {
			sub = append(sub, page{n, v})
		}
	}
	ds.Close()
	sort.Slice(sub, func(i, j int) bool { return sub[i].n < sub[j].n })
	for _, p := range sub {
		pages = append(pages, p.name)
	}
	if len(pages) == 0 {
		pages = []string{path}
	}
	var out []float32
	var c, h, w int
	planes := make([][]float32, 0)
	for z, name := range pages {
		pd, err := godal.Open(name, godal.RasterOnly(), godal.SkipWarnings)
		if err != nil {
			return nil, nil, fmt.Errorf("%s, page %d: %w", path, z+1, err)
		}
		st := pd.Structure()
		if z == 0 {
			c, h, w = st.NBands, st.SizeY, st.SizeX
		} else if st.NBands != c || st.SizeY != h || st.SizeX != w {
			pd.Close()
			return nil, nil, fmt.Errorf("%s: page %d is %dx%d with %d bands; page 1 is %dx%d with %d: a stack's pages must agree", path, z+1, st.SizeX, st.SizeY, st.NBands, w, h, c)
		}
		for bi, band := range pd.Bands() {
			buf := make([]float32, h*w)
			if err := band.Read(0, 0, buf, w, h); err != nil {
				pd.Close()
				return nil, nil, fmt.Errorf("%s, page %d, band %d: %w", path, z+1, bi+1, err)
			}
			planes = append(planes, buf)
		}
		pd.Close()
	}
	d := len(pages)
	out = make([]float32, c*d*h*w)
	for z := 0; z < d; z++ {
		for ch := 0; ch < c; ch++ {
			copy(out[(ch*d+z)*h*w:], planes[z*c+ch])
		}
	}
	return out, []int{c, d, h, w}, nil
}
