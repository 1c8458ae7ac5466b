//go:build cgo

package geotiff

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/airbusgeo/godal"

	"pipe/dataset/remote"
	"pipe/dataset/source"
	"pipe/spec"
)

// A geotiff source cuts a scene into tiles through GDAL (godal).
//
// Tiles of the selected bands lie fully inside the raster, in row-major
// order; nodata pixels are zeroed and masked out; inputs are normalised
// from our own statistics pass at Open (which also finds a corrupt file
// early); a target raster is warped onto the scene's grid and left
// unscaled for the executor (TargetNorm); split is by tile or by blocks of
// pixels. Byte and UInt16 bands take the fast path (fast.go, direct.go).
// GDAL handles are not safe for concurrent use, so the dataset keeps a
// pool of them, one per loader worker in effect.
// Full description: docs/design/geotiff-source.md.

var gdalOnce sync.Once

func gdalInit() { gdalOnce.Do(godal.RegisterAll) }

// InitGDAL registers GDAL's drivers, once, for other readers of rasters
// through godal (dataset's TIFF stacks).
func InitGDAL() { gdalInit() }

func blockErr(s *spec.Source, field string, err error) error { return source.FieldErr(s, field, err) }

func fileErr(c *Options, p string, err error) error { return source.FileErr(c.Base, p, err) }

// pickBands sets the bands a source reads (its bands field, else all of
// the file's nBands) and its target bands (bandTargets).
func (d *Dataset) pickBands(b *spec.Source, nBands int) error {
	if l := slices.Clone(b.GeoTIFF.Bands); l != nil {
		for _, bn := range l {
			if bn < 1 || bn > nBands {
				return blockErr(b, "bands", fmt.Errorf("%s: band %d does not exist (the file has bands 1 to %d)", d.path, bn, nBands))
			}
		}
		d.bands = l
	} else {
		for i := 1; i <= nBands; i++ {
			d.bands = append(d.bands, i)
		}
	}
	if len(d.bands) == 0 {
		return blockErr(b, "path", fmt.Errorf("%s: the raster has no bands", d.path))
	}
	return d.bandTargets(b, nBands)
}

// pickTiles sets the tile size (the tile field, else the whole scene on
// d.grid) and returns the stride between tiles.
func (d *Dataset) pickTiles(b *spec.Source) ([2]int, error) {
	d.th, d.tw = d.grid.Height, d.grid.Width
	stride := [2]int{}
	if v := b.GeoTIFF.Tile; v != nil {
		d.th, d.tw = int(v[0]), int(v[1])
		stride = [2]int{d.th, d.tw}
		if s := b.GeoTIFF.Stride; s != nil {
			stride = [2]int{int(*s), int(*s)}
		}
		if d.th > d.grid.Height || d.tw > d.grid.Width {
			return stride, blockErr(b, "tile", fmt.Errorf("%s: tiles of %dx%d do not fit in the %dx%d raster", d.path, d.th, d.tw, d.grid.Height, d.grid.Width))
		}
	}
	if stride[0] == 0 {
		stride = [2]int{1, 1}
	}
	return stride, nil
}

// handlePool hands out GDAL handles of one file, one per concurrent user.
type handlePool struct {
	path   string
	mu     sync.Mutex
	free   []*godal.Dataset
	all    []*godal.Dataset
	closed bool
}

func (p *handlePool) get() (*godal.Dataset, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("the dataset is closed")
	}
	if n := len(p.free); n > 0 {
		h := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return h, nil
	}
	p.mu.Unlock()
	h, err := godal.Open(p.path, godal.RasterOnly(), godal.SkipWarnings)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		h.Close()
		return nil, errors.New("the dataset is closed")
	}
	p.all = append(p.all, h)
	return h, nil
}

func (p *handlePool) put(h *godal.Dataset) {
	p.mu.Lock()
	p.free = append(p.free, h)
	p.mu.Unlock()
}

// closeIdle closes the handles no one holds (GDAL drops their cached
// blocks); get opens new ones when asked.
func (p *handlePool) closeIdle() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, h := range p.free {
		errs = append(errs, h.Close())
		p.all = slices.DeleteFunc(p.all, func(a *godal.Dataset) bool { return a == h })
	}
	p.free = nil
	return errors.Join(errs...)
}

// close closes every handle; it must not race with get/put users (the
// loader is closed before its dataset).
func (p *handlePool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for _, h := range p.all {
		errs = append(errs, h.Close())
	}
	p.all, p.free = nil, nil
	return errors.Join(errs...)
}

type Dataset struct {
	path     string         // as written; a URL as remote.Redact shows it
	obj      *remote.Object // the object of a URL; nil for a local file
	grid     GeoGrid
	bands    []int     // 1-based, as written
	bands0   []int     // 0-based, as godal.Bands takes them
	nodata   []float64 // per selected band; NaN when none
	norm     source.Norm
	target   []float32 // warped, Width×Height; NaN where invalid; nil without target
	scene    []bool    // Width×Height: every selected band has data
	tiles    []Window
	th, tw   int
	pool     *handlePool
	dropped  int
	coverage float64

	// The split, made at Open: parts of tiles, by index.
	split          bool
	trainIx, valIx []int
	straddling     int
	tnorm          source.Norm // the target's statistics over the training pixels
	targetStandard bool        // target_normalize standard

	// With target_bands, bands holds the input bands then the target
	// bands: nIn inputs, nT targets (0 without). down is downsample's
	// factor (1 without).
	nIn, nT, down int

	// The fast path's tables and buffers (fast.go); lut is nil
	// when the bands' type does not allow it.
	lut     []*fastLUT
	ndRaw   []int32 // per band: the raw nodata value, −1 when none fits
	anyND   bool
	scratch *sync.Pool
	direct  *tiffDirect // the direct block reader (direct.go); nil when it does not apply
}

// Open opens the geotiff source b describes: it reads the scene once
// (statistics, validity, and a full read that surfaces a damaged file),
// warps the target, cuts the tiles and makes the split. Errors are
// *source.Error values at the field concerned.
func Open(b *spec.Source, c *Options) (*Dataset, error) {
	if c == nil {
		c = &Options{}
	}
	gdalInit()
	r, h, err := open(c, b.GeoTIFF.Path)
	if err != nil {
		return nil, blockErr(b, "path", err)
	}
	d := &Dataset{path: r.shown, obj: r.obj}
	d.pool = &handlePool{path: r.gdal, all: []*godal.Dataset{h}, free: []*godal.Dataset{h}}
	ok := false
	defer func() {
		if !ok {
			d.pool.close()
		}
	}()

	st := h.Structure()
	d.grid = GeoGrid{Width: st.SizeX, Height: st.SizeY, Projection: h.Projection()}
	gt, gtErr := h.GeoTransform(godal.SkipWarnings)
	if gtErr == nil {
		d.grid.GeoTransform = gt
	} else {
		d.grid.GeoTransform = [6]float64{0, 1, 0, 0, 0, 1}
	}
	if err := d.pickBands(b, st.NBands); err != nil {
		return nil, err
	}
	for _, bn := range d.bands {
		d.bands0 = append(d.bands0, bn-1)
	}
	all := h.Bands()
	userND, hasUserND := math.NaN(), false
	if v := b.GeoTIFF.Nodata; v != nil {
		userND, hasUserND = *v, true
	}
	for _, bn := range d.bands {
		nd := math.NaN()
		if hasUserND {
			nd = userND
		} else if v, ok := all[bn-1].NoData(); ok {
			nd = v
		}
		d.nodata = append(d.nodata, nd)
	}

	stride, err := d.pickTiles(b)
	if err != nil {
		return nil, err
	}

	// One pass over the scene: statistics, validity, and a full read
	// that surfaces a damaged file now.
	mode := b.GeoTIFF.Normalize
	if mode == "" {
		mode = "per_band"
	}
	valid, err := d.scan(h, mode, c)
	if err != nil {
		return nil, blockErr(b, "path", err)
	}
	d.scene = valid

	if d.nT > 0 && d.th%d.down+d.tw%d.down != 0 {
		return nil, blockErr(b, "downsample", fmt.Errorf("tiles of %dx%d do not divide by downsample %d", d.th, d.tw, d.down))
	}
	if tp := b.GeoTIFF.Target; tp != "" {
		if gtErr != nil || d.grid.Projection == "" {
			return nil, blockErr(b, "path", fmt.Errorf("%s: the scene has no %s, so the target cannot be placed on its grid", d.path, missingGeo(gtErr, d.grid.Projection)))
		}
		if d.target, err = warpTarget(c, tp, d.grid); err != nil {
			return nil, blockErr(b, "target", err)
		}
		valid = slices.Clone(valid)
		n := 0
		for p, t := range d.target {
			if !valid[p] || math.IsNaN(float64(t)) {
				valid[p] = false
				d.target[p] = float32(math.NaN())
				continue
			}
			n++
		}
		if n == 0 {
			return nil, blockErr(b, "target", fmt.Errorf("%s and %s do not overlap: after warping the target onto the scene's grid no pixel is valid in both (scene %s; target %s)",
				d.path, shownPath(tp), describeExtent(d.grid), describeTargetExtent(c, tp)))
		}
	}
	nValid := 0
	for _, v := range valid {
		if v {
			nValid++
		}
	}
	d.coverage = float64(nValid) / float64(len(valid))

	d.prepareFast(h)
	d.prepareDirect(h)

	// Row-major tiles; with a target, those without a valid pixel are
	// left out. A summed-area table answers "any valid pixel?" per tile.
	var sat []int
	if d.target != nil {
		sat = summedArea(valid, d.grid.Width, d.grid.Height)
	}
	for y := 0; y+d.th <= d.grid.Height; y += stride[0] {
		for x := 0; x+d.tw <= d.grid.Width; x += stride[1] {
			w := Window{X: x, Y: y, W: d.tw, H: d.th}
			if sat != nil && areaSum(sat, d.grid.Width, w) == 0 {
				d.dropped++
				continue
			}
			d.tiles = append(d.tiles, w)
		}
	}
	if len(d.tiles) == 0 {
		return nil, blockErr(b, "tile", fmt.Errorf("%s: no tile has a valid target pixel (%d left out)", d.path, d.dropped))
	}
	if err := d.splitTiles(b, c); err != nil {
		return nil, blockErr(b, "split", err)
	}
	if d.target != nil {
		d.targetStandard = b.GeoTIFF.TargetNormalize != "none"
		d.tnorm = d.targetStats()
	}
	ok = true
	return d, nil
}

// splitTiles makes the source's split, when it has one.
func (d *Dataset) splitTiles(b *spec.Source, c *Options) error {
	if b.Split == nil {
		return nil
	}
	frac, seed := b.Split.Fraction, c.Seed
	if b.Split.Seed != nil {
		seed = *b.Split.Seed
	}
	d.split = true
	bv := b.Split.Blocks
	if bv == nil {
		d.trainIx, d.valIx = source.SplitIndices(len(d.tiles), frac, seed)
		return nil
	}
	size := int(*bv)
	if size < max(d.th, d.tw) {
		return fmt.Errorf("blocks %d are smaller than the %dx%d tiles, so no tile lies in one block; give blocks of at least %d", size, d.th, d.tw, max(d.th, d.tw))
	}
	var err error
	d.trainIx, d.valIx, d.straddling, err = splitByBlocks(d.tiles, d.grid.Width, d.grid.Height, size, frac, seed)
	if err != nil {
		return fmt.Errorf("%s: %w", d.path, err)
	}
	return nil
}

// Parts returns the training and validation tiles, by index, and false
// when the source has no split: the parts dataset.OpenSplit takes.
func (d *Dataset) Parts() (train, val []int, ok bool) { return d.trainIx, d.valIx, d.split }

// targetStats is the mean and standard deviation of the warped target
// over the valid pixels the training tiles cover (all tiles without a
// split), each pixel counted once: a 2-D difference array marks the
// tiles' coverage in one pass over the scene, however much they overlap.
func (d *Dataset) targetStats() source.Norm {
	w, h := d.grid.Width, d.grid.Height
	W := w + 1
	diff := make([]int32, W*(h+1))
	mark := func(t Window) {
		diff[t.Y*W+t.X]++
		diff[t.Y*W+t.X+t.W]--
		diff[(t.Y+t.H)*W+t.X]--
		diff[(t.Y+t.H)*W+t.X+t.W]++
	}
	if d.split {
		for _, i := range d.trainIx {
			mark(d.tiles[i])
		}
	} else {
		for _, t := range d.tiles {
			mark(t)
		}
	}
	// Prefix sums along rows, then down columns, turn diff into counts.
	for y := range h + 1 {
		for x := 1; x < W; x++ {
			diff[y*W+x] += diff[y*W+x-1]
		}
	}
	var n, sum, sq float64
	for y := range h {
		for x := range w {
			if y > 0 {
				diff[y*W+x] += diff[(y-1)*W+x]
			}
			t := float64(d.target[y*w+x])
			if diff[y*W+x] == 0 || math.IsNaN(t) {
				continue
			}
			n++
			sum += t
			sq += t * t
		}
	}
	if n == 0 {
		return source.Norm{}
	}
	mean := sum / n
	std := math.Sqrt(max(sq/n-mean*mean, 0))
	if std == 0 {
		std = 1
	}
	return source.Norm{Mean: []float64{mean}, Std: []float64{std}}
}

func missingGeo(gtErr error, proj string) string {
	switch {
	case gtErr != nil && proj == "":
		return "geotransform and no CRS"
	case gtErr != nil:
		return "geotransform"
	}
	return "CRS"
}

// scan reads the scene in strips of rows, marks valid pixels and computes
// the normalisation.
func (d *Dataset) scan(h *godal.Dataset, mode string, c *Options) ([]bool, error) {
	w, ht, nb := d.grid.Width, d.grid.Height, len(d.bands)
	valid := make([]bool, w*ht)
	sum := make([]float64, nb)
	sq := make([]float64, nb)
	n := 0
	rows := max(1, min(ht, (1<<22)/max(1, w*nb)))
	buf := make([]float32, nb*rows*w)
	for y0 := 0; y0 < ht; y0 += rows {
		r := min(rows, ht-y0)
		if err := h.Read(0, y0, buf, w, r, godal.Bands(d.bands0...), godal.BandInterleaved()); err != nil {
			return nil, fmt.Errorf("%s: reading rows %d to %d failed (is the file truncated or corrupt?): %v", d.path, y0, y0+r-1, err)
		}
		plane := r * w
		for p := 0; p < plane; p++ {
			ok := true
			for k := 0; k < nb; k++ {
				if d.isNodata(k, buf[k*plane+p]) {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			valid[y0*w+p] = true
			n++
			for k := 0; k < nb; k++ {
				v := float64(buf[k*plane+p])
				sum[k] += v
				sq[k] += v * v
			}
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: every pixel is nodata", d.path)
	}
	// The training source's statistics, input bands first: a source
	// without the target bands (prediction) takes the inputs' alone.
	if c.Norm != nil && len(c.Norm.Mean) >= nb && len(c.Norm.Std) >= nb && mode != "none" {
		d.norm = source.Norm{Mean: c.Norm.Mean[:nb], Std: c.Norm.Std[:nb]}
		return valid, nil
	}
	switch mode {
	case "none":
	case "global":
		var s, ss float64
		for k := range nb {
			s += sum[k]
			ss += sq[k]
		}
		cnt := float64(n * nb)
		mean := s / cnt
		std := math.Sqrt(max(ss/cnt-mean*mean, 0))
		if std == 0 {
			std = 1
		}
		d.norm = source.Norm{Mean: make([]float64, nb), Std: make([]float64, nb)}
		for k := range nb {
			d.norm.Mean[k], d.norm.Std[k] = mean, std
		}
	default: // per_band, standard
		d.norm = source.Norm{Mean: make([]float64, nb), Std: make([]float64, nb)}
		for k := range nb {
			mean := sum[k] / float64(n)
			std := math.Sqrt(max(sq[k]/float64(n)-mean*mean, 0))
			if std == 0 {
				std = 1
			}
			d.norm.Mean[k], d.norm.Std[k] = mean, std
		}
	}
	return valid, nil
}

func (d *Dataset) isNodata(k int, v float32) bool {
	f := float64(v)
	return math.IsNaN(f) || f == d.nodata[k]
}

// warpTarget warps band 1 of the target raster onto grid (bilinear),
// into memory. Pixels the target does not cover, or covers with its own
// nodata, are NaN.
func warpTarget(c *Options, p string, grid GeoGrid) ([]float32, error) {
	r, t, err := open(c, p)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	p = r.shown
	if t.Projection() == "" {
		return nil, fmt.Errorf("%s: the target has no CRS, so it cannot be placed on the scene's grid", p)
	}
	if _, err := t.GeoTransform(godal.SkipWarnings); err != nil {
		return nil, fmt.Errorf("%s: the target has no geotransform, so it cannot be placed on the scene's grid", p)
	}
	if t.Structure().NBands < 1 {
		return nil, fmt.Errorf("%s: the target has no bands", p)
	}
	// A one-band view, so that a multi-band target warps only band 1.
	src := t
	if t.Structure().NBands > 1 {
		v, err := t.Translate("", []string{"-of", "VRT", "-b", "1"}, godal.SkipWarnings)
		if err != nil {
			return nil, fmt.Errorf("%s: selecting band 1 failed (is the file truncated or corrupt?): %v", p, err)
		}
		defer v.Close()
		src = v
	}
	mem, err := godal.Create(godal.Memory, "", 1, godal.Float32, grid.Width, grid.Height, godal.SkipWarnings)
	if err != nil {
		return nil, fmt.Errorf("warping %s: %v", p, err)
	}
	defer mem.Close()
	nan := math.NaN()
	band := mem.Bands()[0]
	if err := errors.Join(
		mem.SetGeoTransform(grid.GeoTransform),
		mem.SetProjection(grid.Projection),
		band.SetNoData(nan),
		band.Fill(nan, 0),
	); err != nil {
		return nil, fmt.Errorf("warping %s: preparing the grid: %v", p, err)
	}
	if err := mem.WarpInto([]*godal.Dataset{src}, []string{"-r", "bilinear"}, godal.SkipWarnings); err != nil {
		return nil, fmt.Errorf("%s: warping onto the scene's grid failed (is the file truncated or corrupt?): %v", p, err)
	}
	out := make([]float32, grid.Width*grid.Height)
	if err := mem.Read(0, 0, out, grid.Width, grid.Height); err != nil {
		return nil, fmt.Errorf("warping %s: %v", p, err)
	}
	return out, nil
}

func describeExtent(g GeoGrid) string {
	gt := g.GeoTransform
	x1 := gt[0] + float64(g.Width)*gt[1] + float64(g.Height)*gt[2]
	y1 := gt[3] + float64(g.Width)*gt[4] + float64(g.Height)*gt[5]
	return fmt.Sprintf("x %.6g..%.6g, y %.6g..%.6g", min(gt[0], x1), max(gt[0], x1), min(gt[3], y1), max(gt[3], y1))
}

func describeTargetExtent(c *Options, p string) string {
	_, t, err := open(c, p)
	if err != nil {
		return "unknown extent"
	}
	defer t.Close()
	gt, _ := t.GeoTransform(godal.SkipWarnings)
	st := t.Structure()
	s := describeExtent(GeoGrid{Width: st.SizeX, Height: st.SizeY, GeoTransform: gt})
	if sr := t.SpatialRef(); sr != nil {
		defer sr.Close()
		if code := sr.AuthorityCode(""); code != "" {
			s += " in " + sr.AuthorityName("") + ":" + code
		}
	}
	return s
}

// summedArea returns the (w+1)×(h+1) summed-area table of valid.
func summedArea(valid []bool, w, h int) []int {
	s := make([]int, (w+1)*(h+1))
	for y := 0; y < h; y++ {
		row := 0
		for x := 0; x < w; x++ {
			if valid[y*w+x] {
				row++
			}
			s[(y+1)*(w+1)+x+1] = s[y*(w+1)+x+1] + row
		}
	}
	return s
}

func areaSum(s []int, w int, win Window) int {
	W := w + 1
	x0, y0, x1, y1 := win.X, win.Y, win.X+win.W, win.Y+win.H
	return s[y1*W+x1] - s[y0*W+x1] - s[y1*W+x0] + s[y0*W+x0]
}

func (d *Dataset) Len() int { return len(d.tiles) }
func (d *Dataset) XShape() []int64 {
	if d.nT > 0 {
		return []int64{int64(d.nIn), int64(d.th / d.down), int64(d.tw / d.down)}
	}
	return []int64{int64(len(d.bands)), int64(d.th), int64(d.tw)}
}

// YShape is [1, H, W] with a target and [0, H, W] without one (nothing
// to read: a scene opened for predict only).
func (d *Dataset) YShape() []int64 {
	if d.nT > 0 {
		return []int64{int64(d.nT), int64(d.th), int64(d.tw)}
	}
	if d.target == nil {
		return []int64{0, int64(d.th), int64(d.tw)}
	}
	return []int64{1, int64(d.th), int64(d.tw)}
}
func (d *Dataset) Classes() int      { return 0 }
func (d *Dataset) HasMask() bool     { return d.target != nil || d.nT > 0 }
func (d *Dataset) Norm() source.Norm { return d.norm }
func (d *Dataset) Grid() GeoGrid     { return d.grid }
func (d *Dataset) Tile(i int) Window { return d.tiles[i] }
func (d *Dataset) Coverage() float64 { return d.coverage }
func (d *Dataset) Dropped() int      { return d.dropped }
func (d *Dataset) Straddling() int   { return d.straddling }
func (d *Dataset) Close() error      { return errors.Join(d.pool.close(), d.direct.close()) }

func (d *Dataset) Valid(x, y int) bool {
	return x >= 0 && y >= 0 && x < d.grid.Width && y < d.grid.Height && d.scene[y*d.grid.Width+x]
}

// TargetNorm implements data.TargetNormalized; without a target it is empty.
func (d *Dataset) TargetNorm() (source.Norm, bool) { return d.tnorm, d.targetStandard }

func (d *Dataset) Read(i int, x, y, mask []float32) error {
	if i < 0 || i >= len(d.tiles) {
		return fmt.Errorf("geotiff: sample %d out of range [0, %d)", i, len(d.tiles))
	}
	return d.ReadWindow(d.tiles[i], x, y, mask)
}

func (d *Dataset) ReadWindow(win Window, x, y, mask []float32) error {
	if d.nT > 0 {
		return d.readBandTargets(win, x, y, mask)
	}
	if ok, err := d.readFast(win, x, y, mask); ok {
		return err
	}
	_, err := d.readWindow(win, x, y, mask)
	return err
}

// readWindow reads every band of d.bands into x, and the target; it
// returns which pixels are valid.
func (d *Dataset) readWindow(win Window, x, y, mask []float32) ([]bool, error) {
	nb := len(d.bands)
	plane := win.W * win.H
	if len(x) < nb*plane {
		return nil, fmt.Errorf("geotiff: x holds %d values, the window needs %d", len(x), nb*plane)
	}
	x = x[:nb*plane]
	// The part of the window inside the raster.
	cx0, cy0 := max(win.X, 0), max(win.Y, 0)
	cx1, cy1 := min(win.X+win.W, d.grid.Width), min(win.Y+win.H, d.grid.Height)
	inside := make([]bool, plane)
	if cx0 < cx1 && cy0 < cy1 {
		h, err := d.pool.get()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.path, err)
		}
		cw, ch := cx1-cx0, cy1-cy0
		var buf []float32
		if cw == win.W && ch == win.H {
			buf = x
		} else {
			buf = make([]float32, nb*cw*ch)
		}
		err = h.Read(cx0, cy0, buf, cw, ch, godal.Bands(d.bands0...), godal.BandInterleaved())
		d.pool.put(h)
		if err != nil {
			return nil, fmt.Errorf("%s: reading the window at column %d, row %d (%dx%d): %v", d.path, cx0, cy0, ch, cw, err)
		}
		if cw != win.W || ch != win.H {
			clear(x)
			for k := range nb {
				for r := range ch {
					src := buf[k*cw*ch+r*cw : k*cw*ch+(r+1)*cw]
					copy(x[k*plane+(cy0-win.Y+r)*win.W+(cx0-win.X):], src)
				}
			}
		}
		for r := cy0 - win.Y; r < cy1-win.Y; r++ {
			for c := cx0 - win.X; c < cx1-win.X; c++ {
				inside[r*win.W+c] = true
			}
		}
	} else {
		clear(x)
	}
	for p := range plane {
		ok := inside[p]
		for k := 0; ok && k < nb; k++ {
			ok = !d.isNodata(k, x[k*plane+p])
		}
		if !ok {
			inside[p] = false
			for k := range nb {
				x[k*plane+p] = 0
			}
			continue
		}
		if d.norm.Mean != nil {
			for k := range nb {
				x[k*plane+p] = float32((float64(x[k*plane+p]) - d.norm.Mean[k]) / d.norm.Std[k])
			}
		}
	}
	if d.target == nil {
		return inside, nil
	}
	d.targetWindow(win, func(p int) bool { return inside[p] }, y, mask)
	return inside, nil
}

// targetWindow writes the target of window win into y and its validity
// into mask (each when it holds a plane): a pixel is valid where valid(p)
// says the inputs are and the target is not NaN; invalid pixels get 0.
func (d *Dataset) targetWindow(win Window, valid func(p int) bool, y, mask []float32) {
	plane := win.W * win.H
	for r := range win.H {
		row := (win.Y+r)*d.grid.Width + win.X
		for c := range win.W {
			p := r*win.W + c
			var t float32
			ok := valid(p)
			if ok {
				t = d.target[row+c]
				ok = !math.IsNaN(float64(t))
			}
			if !ok {
				t = 0
			}
			if len(y) >= plane {
				y[p] = t
			}
			if len(mask) >= plane {
				mask[p] = b2f(ok)
			}
		}
	}
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}
