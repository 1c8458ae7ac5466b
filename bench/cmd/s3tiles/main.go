// Command s3tiles measures the GeoTIFF tile throughput of a geotiff source
// read from s3:// on a local S3 server (internal/s3test) with 0, 20 and
// 50 ms added to every request, against the same source read from the
// local file and against raw GDAL /vsis3/ window reads of the same tiles
// with the same number of threads:
//
//	go run ./bench/cmd/s3tiles [-size 2048] [-rounds 3] [-threads N] [-latency 0,20,50] [-json bench/s3tiles.json]
//
// (make bench runs it). The raster is the Landsat scene mirrored out to
// size×size, 6 bands of bytes, a DEFLATE COG of 256×256 blocks, read in
// 256×256 tiles, row-major, every tile once a pass. The remote cache is
// emptied before each of pipe's passes; GDAL's block cache and the direct
// reader's (GDAL_CACHEMAX 8 MB) and GDAL's /vsicurl/ cache (4 MB) are
// smaller than the file, so no pass finds what the one before left. Beside every figure it
// records the CPU model and the load average.
// Method and results: docs/design/remote-sources.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/airbusgeo/godal"

	"pipe/bench/internal/tileread"
	"pipe/dataset"
	"pipe/dataset/remote"
	"pipe/internal/memrun"
	"pipe/internal/s3test"
)

const (
	tile  = 256
	bands = 6
	key   = "bench/scene-cog.tif"
)

// Row is one latency's figures.
type Row struct {
	LatencyMS     int     `json:"latency_ms"`
	Threads       int     `json:"threads"`
	Tiles         int     `json:"tiles"`
	Local         float64 `json:"local_tiles_per_s"`
	PipeS3        float64 `json:"pipe_s3_tiles_per_s"`
	GDALS3        float64 `json:"gdal_vsis3_tiles_per_s"`
	PipeRequests  float64 `json:"pipe_requests_per_pass"`
	PipeMB        float64 `json:"pipe_mb_per_pass"`
	PipeWaitShare float64 `json:"pipe_reader_wait_share"` // readers' summed wait on blocks / (pass time × threads)
	GDALRequests  float64 `json:"gdal_requests_per_pass"`
	CPU           string  `json:"cpu"`
	LoadBefore    string  `json:"loadavg_before"`
	LoadAfter     string  `json:"loadavg_after"`
}

// Results is what -json writes.
type Results struct {
	Date      string `json:"date"`
	CPU       string `json:"cpu"`
	CPUs      int    `json:"cpus"`
	Raster    string `json:"raster"`
	FileBytes int    `json:"file_bytes"`
	Rounds    int    `json:"rounds"`
	Rows      []Row  `json:"rows"`
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("s3tiles", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.Int("size", 2048, "raster width and height in pixels")
	rounds := fs.Int("rounds", 3, "interleaved rounds per latency")
	threads := fs.Int("threads", runtime.NumCPU(), "loader workers and GDAL threads")
	lats := fs.String("latency", "0,20,50", "milliseconds added to every request, comma-separated")
	scene := fs.String("scene", "data/L7_ETMs.tif", "the scene the raster is built from")
	jsonOut := fs.String("json", "bench/s3tiles.json", "write the results here (empty: nowhere)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var latencies []int
	for _, f := range strings.Split(*lats, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintln(stderr, "s3tiles: -latency:", err)
			return 2
		}
		latencies = append(latencies, v)
	}
	if err := bench(*size, *rounds, *threads, latencies, *scene, *jsonOut, stdout); err != nil {
		fmt.Fprintln(stderr, "s3tiles:", err)
		return 1
	}
	return 0
}

func bench(size, rounds, threads int, latencies []int, scene, jsonOut string, w io.Writer) error {
	// Caches smaller than the file, for every side (see the package doc).
	os.Setenv("GDAL_CACHEMAX", "8")
	os.Setenv("CPL_VSIL_CURL_CACHE_SIZE", strconv.Itoa(4<<20))
	os.Setenv("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR")
	os.Setenv("PIPE_REMOTE_CACHE_MB", "64") // above the prefetch's reach; emptied before each pass
	godal.RegisterAll()
	dir, err := os.MkdirTemp("", "s3tiles")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, "scene-cog.tif")
	if err := makeRaster(scene, local, size); err != nil {
		return err
	}
	body, err := os.ReadFile(local)
	if err != nil {
		return err
	}
	srv, err := s3test.Start(map[string][]byte{key: body})
	if err != nil {
		return err
	}
	defer srv.Close()
	for k, v := range srv.Env() {
		os.Setenv(k, v) // pipe's client and GDAL's /vsis3/ read the same names
	}
	var wins []dataset.Window
	for y := 0; y+tile <= size; y += tile {
		for x := 0; x+tile <= size; x += tile {
			wins = append(wins, dataset.Window{X: x, Y: y, W: tile, H: tile})
		}
	}
	cpu := memrun.CPUName()
	res := Results{Date: time.Now().UTC().Format(time.RFC3339), CPU: cpu, CPUs: runtime.NumCPU(), Rounds: rounds, FileBytes: len(body),
		Raster: fmt.Sprintf("%dx%d, %d bands of bytes, DEFLATE COG of %dx%d blocks; %d tiles of %dx%d", size, size, bands, tile, tile, len(wins), tile, tile)}
	fmt.Fprintf(w, "s3tiles: %s (%d bytes), %d threads, %s\n", res.Raster, len(body), threads, cpu)

	localDS, err := tileread.Open(local, tile)
	if err != nil {
		return err
	}
	defer localDS.Close()
	remote.Reset(-1)
	s3DS, err := tileread.Open(srv.URL(key), tile)
	if err != nil {
		return err
	}
	defer s3DS.Close()
	opt := dataset.LoaderOptions{BatchSize: 8, Workers: threads, Prefetch: 2}
	ll, sl := dataset.NewLoader(localDS, opt), dataset.NewLoader(s3DS, opt)
	gdal, err := newRaw("/vsis3/"+s3test.Bucket+"/"+key, threads)
	if err != nil {
		return err
	}
	defer gdal.close()

	for _, lat := range latencies {
		row := Row{LatencyMS: lat, Threads: threads, Tiles: len(wins), CPU: cpu, LoadBefore: memrun.LoadAvg()}
		srv.Latency.Store(int64(time.Duration(lat) * time.Millisecond))
		var loc, pip, gd, preq, pmb, pwait, greq []float64
		for r := range rounds {
			sides := []func() error{
				func() error {
					v, err := tileread.Pass(ll, r, len(wins))
					loc = append(loc, v)
					return err
				},
				func() error {
					remote.Flush() // a cold pass, as the other sides' small caches make theirs
					st0 := remote.ReadStats()
					t0 := time.Now()
					v, err := tileread.Pass(sl, r, len(wins))
					el := time.Since(t0)
					st := remote.ReadStats().Sub(st0)
					pip = append(pip, v)
					preq = append(preq, float64(st.Requests))
					pmb = append(pmb, float64(st.Bytes)/1e6)
					pwait = append(pwait, st.Wait.Seconds()/(el.Seconds()*float64(threads)))
					return err
				},
				func() error {
					n0 := srv.Requests.Load()
					v, err := tileread.Timed(len(wins), func() error { return gdal.pass(wins) })
					gd = append(gd, v)
					greq = append(greq, float64(srv.Requests.Load()-n0))
					return err
				},
			}
			for i := range sides {
				if err := sides[(i+r)%len(sides)](); err != nil {
					return fmt.Errorf("latency %d ms: %w", lat, err)
				}
			}
		}
		row.Local, row.PipeS3, row.GDALS3 = memrun.Median(loc), memrun.Median(pip), memrun.Median(gd)
		row.PipeRequests, row.PipeMB, row.PipeWaitShare, row.GDALRequests = memrun.Median(preq), memrun.Median(pmb), memrun.Median(pwait), memrun.Median(greq)
		row.LoadAfter = memrun.LoadAvg()
		res.Rows = append(res.Rows, row)
		fmt.Fprintf(w, "  %d ms done (load %s)\n", lat, row.LoadAfter)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency ms\tlocal tiles/s\tpipe s3 tiles/s\tgdal /vsis3/ tiles/s\tpipe/gdal\tpipe req/pass\tpipe MB/pass\tpipe wait share\tgdal req/pass\tload before\t")
	for _, r := range res.Rows {
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.0f\t%.2f\t%.0f\t%.1f\t%.2f\t%.0f\t%s\t\n", r.LatencyMS, r.Local, r.PipeS3, r.GDALS3, r.PipeS3/r.GDALS3, r.PipeRequests, r.PipeMB, r.PipeWaitShare, r.GDALRequests, r.LoadBefore)
	}
	tw.Flush()
	if jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(w, "s3tiles: wrote", jsonOut)
	}
	return nil
}

// makeRaster writes the scene mirrored out to size×size as a DEFLATE COG.
func makeRaster(scene, out string, size int) error {
	src, err := godal.Open(scene, godal.RasterOnly())
	if err != nil {
		return fmt.Errorf("%s: %w (run make data)", scene, err)
	}
	defer src.Close()
	st := src.Structure()
	if st.NBands < bands {
		return fmt.Errorf("%s has %d bands, the raster needs %d", scene, st.NBands, bands)
	}
	sb := make([]uint8, bands*st.SizeX*st.SizeY)
	if err := src.Read(0, 0, sb, st.SizeX, st.SizeY, godal.Bands(0, 1, 2, 3, 4, 5), godal.BandInterleaved()); err != nil {
		return err
	}
	mirror := func(i, n int) int {
		i %= 2 * n
		if i >= n {
			i = 2*n - 1 - i
		}
		return i
	}
	buf := make([]uint8, bands*size*size)
	for b := range bands {
		for y := range size {
			sy := mirror(y, st.SizeY)
			for x := range size {
				buf[(b*size+y)*size+x] = sb[(b*st.SizeY+sy)*st.SizeX+mirror(x, st.SizeX)]
			}
		}
	}
	mem, err := godal.Create(godal.Memory, "", bands, godal.Byte, size, size)
	if err != nil {
		return err
	}
	defer mem.Close()
	if err := mem.Write(0, 0, buf, size, size, godal.BandInterleaved()); err != nil {
		return err
	}
	o, err := mem.Translate(out, []string{"-of", "COG", "-co", "COMPRESS=DEFLATE", "-co", "BLOCKSIZE=" + strconv.Itoa(tile), "-co", "OVERVIEWS=NONE"})
	if err != nil {
		return err
	}
	return o.Close()
}

// raw reads windows with GDAL alone: one handle and one buffer per thread.
type raw struct {
	hs   []*godal.Dataset
	bufs [][]uint8
}

func newRaw(path string, threads int) (*raw, error) {
	r := &raw{}
	for range threads {
		h, err := godal.Open(path, godal.RasterOnly())
		if err != nil {
			r.close()
			return nil, fmt.Errorf("GDAL cannot open %s: %w", path, err)
		}
		r.hs = append(r.hs, h)
		r.bufs = append(r.bufs, make([]uint8, bands*tile*tile))
	}
	return r, nil
}

// pass reads every window once, the threads taking the next in turn.
func (r *raw) pass(wins []dataset.Window) error {
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
				if err := h.Read(w.X, w.Y, r.bufs[i], w.W, w.H, godal.BandInterleaved()); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errJoin(errs)
}

func errJoin(errs []error) error {
	if i := slices.IndexFunc(errs, func(e error) bool { return e != nil }); i >= 0 {
		return errs[i]
	}
	return nil
}

func (r *raw) close() {
	for _, h := range r.hs {
		h.Close()
	}
}
