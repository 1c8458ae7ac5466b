// Command tiles measures GeoTIFF tile throughput: pipe's geotiff source
// against raw GDAL window reads of the same tiles, in one run, and
// gdal_translate -srcwin as a reference:
//
//	go run ./bench/cmd/tiles [-width 8192] [-height 4096] [-rounds 3] [-cachemax 256]
//	                         [-translate 8] [-dir DIR] [-json bench/tiles.json]
//
// (make bench runs it). It builds a 12-band uint16 raster from the Landsat
// scene, writes it uncompressed, DEFLATE and ZSTD, each as a tiled COG and
// as a striped GTiff, and reads its 512×512 tiles with 1, 2 and all
// workers, the sides taking turns within each round. The figures are
// medians over rounds; pipe/gdal is the ratio the target is set on.
//
// Method: docs/design/bench-tiles.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/airbusgeo/godal"

	"pipe/bench/internal/tileread"
	"pipe/dataset"
	"pipe/internal/memrun"
)

const (
	bands = 12
	tile  = 512
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	width, height, rounds, cacheMB, translate int
	dir, jsonOut, scene, only, cpuprofile     string
}

// File is one of the generated rasters.
type File struct {
	Name        string `json:"name"`
	Layout      string `json:"layout"` // cog (tiled) or striped
	Compression string `json:"compression"`
	Bytes       int64  `json:"bytes"`
	path        string
}

// Row is one file at one number of workers.
type Row struct {
	File        string  `json:"file"`
	Layout      string  `json:"layout"`
	Compression string  `json:"compression"`
	Workers     int     `json:"workers"`
	Tiles       int     `json:"tiles"`
	Pipe        float64 `json:"pipe_tiles_per_s"`
	GDAL        float64 `json:"gdal_tiles_per_s"`
	GDALF32     float64 `json:"gdal_float32_tiles_per_s"`
	Ratio       float64 `json:"ratio"`
	RatioF32    float64 `json:"ratio_float32"`
	RatioMin    float64 `json:"ratio_min"`
	RatioMax    float64 `json:"ratio_max"`
}

// Translate is gdal_translate's figure for one file.
type Translate struct {
	File  string  `json:"file"`
	Tiles int     `json:"tiles"`
	Rate  float64 `json:"tiles_per_s"`
}

// Results is what -json writes.
type Results struct {
	Date      string      `json:"date"`
	CPUs      int         `json:"cpus"`
	LoadAvg   string      `json:"loadavg_before"`
	LoadAfter string      `json:"loadavg_after"`
	Raster    string      `json:"raster"`
	CacheMB   int         `json:"gdal_cachemax_mb"`
	Rounds    int         `json:"rounds"`
	Files     []File      `json:"files"`
	Rows      []Row       `json:"rows"`
	Translate []Translate `json:"gdal_translate"`
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tiles", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.width, "width", 8192, "raster width in pixels")
	fs.IntVar(&o.height, "height", 4096, "raster height in pixels")
	fs.IntVar(&o.rounds, "rounds", 3, "interleaved rounds")
	fs.IntVar(&o.cacheMB, "cachemax", 256, "GDAL block cache in MB (GDAL_CACHEMAX), for both sides")
	fs.IntVar(&o.translate, "translate", 8, "tiles written by gdal_translate -srcwin per file (0: none)")
	fs.StringVar(&o.dir, "dir", "", "folder for the generated files, kept and reused when there (default: a temporary one, removed after)")
	fs.StringVar(&o.jsonOut, "json", "bench/tiles.json", "write the results here (empty: nowhere)")
	fs.StringVar(&o.scene, "scene", "data/L7_ETMs.tif", "the scene the raster is built from")
	fs.StringVar(&o.only, "only", "", "measure only the files whose name contains this")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measurements here")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "tiles:", err)
			return 1
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := bench(o, stdout); err != nil {
		fmt.Fprintln(stderr, "tiles:", err)
		return 1
	}
	return 0
}

func bench(o options, w io.Writer) error {
	// Before GDAL's first use, so that its block cache takes it.
	os.Setenv("GDAL_CACHEMAX", fmt.Sprint(o.cacheMB))
	godal.RegisterAll()
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "pipe-tiles-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	res := Results{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), LoadAvg: memrun.LoadAvg(),
		Raster: fmt.Sprintf("%dx%d, %d bands, uint16", o.width, o.height, bands), CacheMB: o.cacheMB, Rounds: o.rounds}
	fmt.Fprintf(w, "tiles: building a %s raster from %s in %s\n", res.Raster, o.scene, dir)
	files, err := makeFiles(o, dir)
	if err != nil {
		return err
	}
	res.Files = files
	var wins []dataset.Window
	for y := 0; y+tile <= o.height; y += tile {
		for x := 0; x+tile <= o.width; x += tile {
			wins = append(wins, dataset.Window{X: x, Y: y, W: tile, H: tile})
		}
	}
	workers := slices.Compact([]int{1, 2, runtime.NumCPU()})
	if runtime.NumCPU() < 2 {
		workers = []int{1, 2}
	}
	for _, f := range files {
		if !strings.Contains(f.Name, o.only) {
			continue
		}
		ds, err := tileread.Open(f.path, 512)
		if err != nil {
			return err
		}
		for _, nw := range workers {
			raw, err := newRaw(f.path, nw)
			if err != nil {
				ds.Close()
				return err
			}
			if err := raw.pass(wins, false); err != nil { // warm the handles
				return err
			}
			// One loader for all rounds, as training keeps one for all
			// epochs; a first pass opens its handles and fills its buffers.
			l := dataset.NewLoader(ds, dataset.LoaderOptions{BatchSize: 8, Workers: nw})
			if _, err := tileread.Pass(l, 0, len(wins)); err != nil {
				return err
			}
			var ps, gs, fs, rs, rf []float64
			for r := range o.rounds {
				measure := []func() (float64, error){
					func() (float64, error) { return tileread.Pass(l, r+1, len(wins)) },
					func() (float64, error) {
						return tileread.Timed(len(wins), func() error { return raw.pass(wins, false) })
					},
					func() (float64, error) {
						return tileread.Timed(len(wins), func() error { return raw.pass(wins, true) })
					},
				}
				out := make([]float64, 3)
				for i := range 3 {
					k := (i + r) % 3
					v, err := measure[k]()
					if err != nil {
						return fmt.Errorf("%s, %d workers: %w", f.Name, nw, err)
					}
					out[k] = v
				}
				ps, gs, fs = append(ps, out[0]), append(gs, out[1]), append(fs, out[2])
				rs, rf = append(rs, out[0]/out[1]), append(rf, out[0]/out[2])
			}
			raw.close()
			row := Row{File: f.Name, Layout: f.Layout, Compression: f.Compression, Workers: nw, Tiles: len(wins),
				Pipe: memrun.Median(ps), GDAL: memrun.Median(gs), GDALF32: memrun.Median(fs), Ratio: memrun.Median(rs), RatioF32: memrun.Median(rf), RatioMin: slices.Min(rs), RatioMax: slices.Max(rs)}
			res.Rows = append(res.Rows, row)
			fmt.Fprintf(w, "  %-16s %d workers: pipe %6.1f tiles/s, gdal %6.1f tiles/s (float32 %6.1f), ratio %.2f\n", f.Name, nw, row.Pipe, row.GDAL, row.GDALF32, row.Ratio)
		}
		ds.Close()
	}
	if o.translate > 0 {
		if _, err := osexec.LookPath("gdal_translate"); err != nil {
			fmt.Fprintln(w, "tiles: no gdal_translate on PATH; its reference is left out")
		} else {
			for _, f := range files {
				t, err := translatePass(f, wins[:min(o.translate, len(wins))], dir)
				if err != nil {
					return err
				}
				res.Translate = append(res.Translate, t)
			}
		}
	}
	res.LoadAfter = memrun.LoadAvg()
	printTables(w, res)
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(w, "tiles: wrote %s\n", o.jsonOut)
	}
	return nil
}

func printTables(w io.Writer, res Results) {
	fmt.Fprintf(w, "\nGeoTIFF tiles of 512x512x%d uint16 from a %s raster, tiles/s (median of %d interleaved rounds; GDAL_CACHEMAX %d MB; %d CPUs; load %s before, %s after)\n",
		bands, strings.Split(res.Raster, ",")[0], res.Rounds, res.CacheMB, res.CPUs, res.LoadAvg, res.LoadAfter)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layout\tcompression\tworkers\tpipe\traw gdal\tpipe/gdal\trange\tgdal float32\tpipe/gdal float32\t")
	for _, r := range res.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%.2f\t%.2f-%.2f\t%.1f\t%.2f\t\n", r.Layout, r.Compression, r.Workers, r.Pipe, r.GDAL, r.Ratio, r.RatioMin, r.RatioMax, r.GDALF32, r.RatioF32)
	}
	tw.Flush()
	if len(res.Translate) > 0 {
		fmt.Fprintln(w, "\ngdal_translate -srcwin, one process per tile, one at a time (reference)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "file\ttiles\ttiles/s\t")
		for _, t := range res.Translate {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t\n", t.File, t.Tiles, t.Rate)
		}
		tw.Flush()
	}
}

// makeFiles writes the raster six ways.
func makeFiles(o options, dir string) ([]File, error) {
	src, err := godal.Open(o.scene, godal.RasterOnly())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.scene, err)
	}
	defer src.Close()
	st := src.Structure()
	sw, sh, sb := st.SizeX, st.SizeY, st.NBands
	scene := make([]float32, sw*sh*sb)
	if err := src.Read(0, 0, scene, sw, sh, godal.BandInterleaved()); err != nil {
		return nil, err
	}
	if fs, ok := reuse(o, dir); ok {
		return fs, nil
	}
	mem, err := godal.Create(godal.Memory, "", bands, godal.UInt16, o.width, o.height)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	buf := make([]uint16, o.width*o.height)
	for b, band := range mem.Bands() {
		plane := scene[(b%sb)*sw*sh:]
		for y := range o.height {
			sy := mirror(y, sh)
			for x := range o.width {
				v := plane[sy*sw+mirror(x, sw)]
				h := uint32(x)*0x9E3779B1 ^ uint32(y)*0x85EBCA77 ^ uint32(b)*0xC2B2AE3D
				h ^= h >> 15
				h *= 0x2C1B3C6D
				h ^= h >> 12
				buf[y*o.width+x] = uint16(v*40) + uint16(100*b) + uint16(h&15)
			}
		}
		if err := band.Write(0, 0, buf, o.width, o.height); err != nil {
			return nil, err
		}
	}
	var files []File
	for _, comp := range compressions {
		for _, layout := range layouts {
			name := strings.ToLower(comp) + "-" + layout
			sw := []string{"-of", "GTiff", "-co", "COMPRESS=" + comp}
			if layout == "cog" {
				sw = []string{"-of", "COG", "-co", "BLOCKSIZE=512", "-co", "COMPRESS=" + comp}
			}
			p := filepath.Join(dir, name+".tif")
			out, err := mem.Translate(p, sw)
			if err != nil {
				return nil, fmt.Errorf("writing %s: %w", name, err)
			}
			if err := out.Close(); err != nil {
				return nil, err
			}
			fi, err := os.Stat(p)
			if err != nil {
				return nil, err
			}
			files = append(files, File{Name: name, Layout: layout, Compression: compressionName(comp), Bytes: fi.Size(), path: p})
		}
	}
	return files, nil
}

var (
	compressions = []string{"NONE", "DEFLATE", "ZSTD"}
	layouts      = []string{"cog", "striped"}
)

// compressionName is how the tables name a COMPRESS value.
func compressionName(comp string) string {
	if comp == "NONE" {
		return "uncompressed"
	}
	return strings.ToLower(comp)
}

// reuse returns the files already in a -dir when all six are there with
// the raster's size.
func reuse(o options, dir string) ([]File, bool) {
	if o.dir == "" {
		return nil, false
	}
	var files []File
	for _, comp := range compressions {
		for _, layout := range layouts {
			name := strings.ToLower(comp) + "-" + layout
			p := filepath.Join(dir, name+".tif")
			fi, err := os.Stat(p)
			if err != nil {
				return nil, false
			}
			h, err := godal.Open(p, godal.RasterOnly())
			if err != nil {
				return nil, false
			}
			st := h.Structure()
			h.Close()
			if st.SizeX != o.width || st.SizeY != o.height || st.NBands != bands {
				return nil, false
			}
			files = append(files, File{Name: name, Layout: layout, Compression: compressionName(comp), Bytes: fi.Size(), path: p})
		}
	}
	return files, true
}

func mirror(i, n int) int {
	i %= 2 * n
	if i >= n {
		i = 2*n - 1 - i
	}
	return i
}

// raw reads windows with GDAL alone: one handle and one buffer per worker.
type raw struct {
	hs   []*godal.Dataset
	bufs [][]uint16
	f32  [][]float32
}

func newRaw(path string, workers int) (*raw, error) {
	r := &raw{}
	for range workers {
		h, err := godal.Open(path, godal.RasterOnly())
		if err != nil {
			r.close()
			return nil, err
		}
		r.hs = append(r.hs, h)
		r.bufs = append(r.bufs, make([]uint16, bands*tile*tile))
		r.f32 = append(r.f32, make([]float32, bands*tile*tile))
	}
	return r, nil
}

// pass reads every window once, the workers taking the next one in turn,
// as uint16 (the file's type), or as float32 with f32.
func (r *raw) pass(wins []dataset.Window, f32 bool) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, len(r.hs))
	for i, h := range r.hs {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(wins) {
					return
				}
				w := wins[k]
				var buf any = r.bufs[i]
				if f32 {
					buf = r.f32[i]
				}
				if err := h.Read(w.X, w.Y, buf, w.W, w.H, godal.BandInterleaved()); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *raw) close() {
	for _, h := range r.hs {
		h.Close()
	}
}

// translatePass runs gdal_translate -srcwin once per window.
func translatePass(f File, wins []dataset.Window, dir string) (Translate, error) {
	out := filepath.Join(dir, "translate-out.tif")
	defer os.Remove(out)
	rate, err := tileread.Timed(len(wins), func() error {
		for _, w := range wins {
			cmd := osexec.Command("gdal_translate", "-q", "-srcwin", fmt.Sprint(w.X), fmt.Sprint(w.Y), fmt.Sprint(w.W), fmt.Sprint(w.H), f.path, out)
			cmd.Env = append(os.Environ(), "GDAL_CACHEMAX="+os.Getenv("GDAL_CACHEMAX"))
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("gdal_translate %s: %v: %s", f.Name, err, b)
			}
		}
		return nil
	})
	return Translate{File: f.Name, Tiles: len(wins), Rate: rate}, err
}
