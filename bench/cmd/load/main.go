// Command load drives pipe serve on loopback and measures it: for each
// model it trains the example briefly on the CPU (pipe run --max-steps,
// on the fixtures where make data fetches nothing), starts pipe serve on
// the checkpoint with dynamic batching and beside it one without
// (--no-batching), and sends, to one then the other, one-sample requests (raw float32) from 1, 8, 64 and 256
// concurrent clients, each level for a bounded time. It prints
// throughput (requests and samples per second) and the p50 and p99
// latency of the answered requests, as this process's clock measured
// them, with the errors and shed requests counted, and writes the table
// to bench/serve.json with the machine's load average. make bench runs
// it.
//
//	go run ./bench/cmd/load [-pipe bin/pipe] [-duration 10s] [-steps 50] [-clients 1,8,64,256] [-out bench/serve.json] [EXAMPLE.pipe[=STEPS]...]
//
// The examples default to the Fashion-MNIST CNN (-steps steps) and the
// pills ResNet-18 on the fixture images (5 steps: a step of ResNet-18 on
// 224x224 images takes seconds on a CPU).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"pipe/internal/memrun"
)

// row is one model, mode and concurrency.
type row struct {
	Model         string  `json:"model"`
	Batching      bool    `json:"batching"`
	Clients       int     `json:"clients"`
	Seconds       float64 `json:"seconds"`
	OK            int     `json:"ok"`
	Shed          int     `json:"shed_503"`
	Errors        int     `json:"errors"`
	RequestsPerS  float64 `json:"requests_per_second"`
	SamplesPerS   float64 `json:"samples_per_second"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	MeanBatch     float64 `json:"mean_batch"`
	ServeSettings string  `json:"serve"`
}

type report struct {
	Note     string    `json:"note"`
	Date     string    `json:"date"`
	Go       string    `json:"go"`
	Cores    int       `json:"cores"`
	LoadAvg  [2]string `json:"load_average_start_end"`
	Duration string    `json:"duration_per_level"`
	Rows     []row     `json:"rows"`
}

func main() {
	pipe := flag.String("pipe", "bin/pipe", "the pipe binary")
	dur := flag.Duration("duration", 10*time.Second, "how long each concurrency level runs")
	steps := flag.Int("steps", 50, "optimizer steps to train each example for (timing needs no accuracy)")
	clients := flag.String("clients", "1,8,64,256", "the concurrency levels")
	out := flag.String("out", "bench/serve.json", "where to write the table (empty: nowhere)")
	flag.Parse()
	examples := flag.Args()
	if len(examples) == 0 {
		examples = []string{"examples/fashion.pipe", "examples/pills.pipe=5"}
	}
	var levels []int
	for _, f := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "load: -clients %s: give positive integers separated by commas\n", *clients)
			os.Exit(2)
		}
		levels = append(levels, n)
	}
	if err := run(*pipe, examples, levels, *dur, *steps, *out); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(pipe string, examples []string, levels []int, dur time.Duration, steps int, out string) error {
	bin, _, dir, cleanup, err := memrun.Workspace(pipe, "pipe-load-")
	if err != nil {
		return err
	}
	defer cleanup()
	rep := report{
		Note: "pipe serve on loopback, one-sample raw float32 requests from N concurrent clients for a fixed time per level, " +
			"batching on and off as two servers driven in turn at each level; " +
			"latency and throughput measured by the load generator's clock (time.Now), mean batch from the server's pipe_serve_batch_size histogram; " +
			"models trained for a few steps on the CPU (timing needs no accuracy); the generator shares the machine's cores with the server.",
		Date: time.Now().UTC().Format(time.RFC3339), Go: runtime.Version(), Cores: runtime.NumCPU(), Duration: dur.String(),
	}
	rep.LoadAvg[0] = memrun.LoadAvg()
	for _, ex := range examples {
		n := steps
		if i := strings.LastIndex(ex, "="); i >= 0 {
			k, err := strconv.Atoi(ex[i+1:])
			if err != nil || k < 1 {
				return fmt.Errorf("%s: give EXAMPLE.pipe=STEPS with STEPS at least 1", ex)
			}
			ex, n = ex[:i], k
		}
		abs, err := filepath.Abs(ex)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(ex), ".pipe")
		fmt.Fprintf(os.Stderr, "load: training %s for %d steps\n", name, n)
		if _, err := memrun.Run(bin, nil, dir, abs, n); err != nil {
			return err
		}
		file := abs
		if f := filepath.Join(dir, name+".pipe"); fileExists(f) {
			file = f // memrun's copy with a smaller effective batch
		}
		ckpt := filepath.Join(dir, "ckpt", name, "last.ckpt")
		rows, err := serveAndLoad(bin, dir, file, ckpt, name, levels, dur)
		if err != nil {
			return err
		}
		// Batching on, then off, each by clients.
		slices.SortStableFunc(rows, func(a, b row) int {
			if a.Batching != b.Batching {
				if a.Batching {
					return -1
				}
				return 1
			}
			return a.Clients - b.Clients
		})
		rep.Rows = append(rep.Rows, rows...)
	}
	rep.LoadAvg[1] = memrun.LoadAvg()
	print(os.Stdout, rep)
	if out == "" {
		return nil
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// server is a running pipe serve.
type server struct {
	cmd           *exec.Cmd
	url, settings string
	batching      bool
}

// startServe starts pipe serve on a free loopback port and reads where
// it listens and how it batches from its first line.
func startServe(bin, dir, file, ckpt, name string, batching bool) (*server, error) {
	args := []string{"serve", "--device", "cpu", "--addr", "127.0.0.1:0", "--checkpoint", ckpt}
	if !batching {
		args = append(args, "--no-batching")
	}
	cmd := exec.Command(bin, append(args, file)...)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(stderr)
	var banner string
	for sc.Scan() {
		if strings.Contains(sc.Text(), " on http://") {
			banner = sc.Text()
			break
		}
		fmt.Fprintln(os.Stderr, sc.Text())
	}
	if banner == "" {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("pipe serve %s did not start", name)
	}
	go io.Copy(io.Discard, stderr)
	url := "http://" + strings.TrimSuffix(strings.Fields(banner[strings.Index(banner, " on http://")+len(" on http://"):])[0], ":")
	settings := strings.TrimSpace(banner[strings.Index(banner, url)+len(url)+1:])
	settings = strings.SplitN(settings, ";", 2)[0]
	fmt.Fprintf(os.Stderr, "load: %s at %s: %s\n", name, url, settings)
	return &server{cmd: cmd, url: url, settings: settings, batching: batching}, nil
}

// stop ends the server with SIGTERM; a clean drain exits 0.
func (s *server) stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		return fmt.Errorf("pipe serve did not drain cleanly on SIGTERM: %v", err)
	}
	return nil
}

// serveAndLoad starts pipe serve with batching and without, both at
// once (the idle one computes nothing), and runs each concurrency level
// against one then the other, so that a change in the machine's load
// falls on both modes alike.
func serveAndLoad(bin, dir, file, ckpt, name string, levels []int, dur time.Duration) ([]row, error) {
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.cmd.Process.Kill()
		}
	}()
	for _, batching := range []bool{true, false} {
		s, err := startServe(bin, dir, file, ckpt, name, batching)
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
	}
	shape, err := inputShape(servers[0].url)
	if err != nil {
		return nil, err
	}
	per := 1
	for _, d := range shape {
		per *= d
	}
	// Raw values in the sources' range (0..255 for images), one sample.
	rng := rand.New(rand.NewPCG(7, 8))
	body := make([]byte, 4*per)
	for i := range per {
		binary.LittleEndian.PutUint32(body[4*i:], math.Float32bits(float32(rng.IntN(256))))
	}
	var rows []row
	for _, c := range levels {
		for _, s := range servers {
			before, err := batches(s.url)
			if err != nil {
				return nil, err
			}
			r := drive(s.url, body, c, dur)
			after, err := batches(s.url)
			if err != nil {
				return nil, err
			}
			if n := after[0] - before[0]; n > 0 {
				r.MeanBatch = round((after[1] - before[1]) / n)
			}
			r.Model, r.Batching, r.ServeSettings = name, s.batching, s.settings
			fmt.Fprintf(os.Stderr, "load: %s batching=%v clients=%d: %.1f req/s, p50 %.1f ms, p99 %.1f ms, %d shed, %d errors\n",
				name, s.batching, c, r.RequestsPerS, r.P50Ms, r.P99Ms, r.Shed, r.Errors)
			rows = append(rows, r)
		}
	}
	for _, s := range servers {
		if err := s.stop(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	servers = nil
	return rows, nil
}

// drive runs c clients for dur, each sending one request at a time.
func drive(url string, body []byte, c int, dur time.Duration) row {
	tr := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c, MaxConnsPerHost: c, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var mu sync.Mutex
	var lat []float64
	var shed, errs int
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				code, err := post(client, url, body)
				d := time.Since(t0).Seconds()
				mu.Lock()
				switch {
				case err != nil:
					errs++
				case code == http.StatusOK:
					lat = append(lat, d)
				case code == http.StatusServiceUnavailable:
					shed++
				default:
					errs++
				}
				mu.Unlock()
				if code == http.StatusServiceUnavailable {
					time.Sleep(10 * time.Millisecond) // as Retry-After asks, briefly
				}
			}
		}()
	}
	wg.Wait()
	// Requests in flight at the deadline finish and count: the time is
	// until the last one is answered.
	secs := time.Since(start).Seconds()
	slices.Sort(lat)
	r := row{Clients: c, Seconds: round(secs), OK: len(lat), Shed: shed, Errors: errs,
		RequestsPerS: round(float64(len(lat)) / secs), SamplesPerS: round(float64(len(lat)) / secs)}
	if len(lat) > 0 {
		r.P50Ms = round(1e3 * quantile(lat, 0.5))
		r.P99Ms = round(1e3 * quantile(lat, 0.99))
	}
	return r
}

func post(c *http.Client, url string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/predict", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// quantile is the q-quantile of sorted xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

// inputShape asks the server for the input shape: the error of an empty
// request says what it expects.
func inputShape(url string) ([]int, error) {
	resp, err := http.Post(url+"/v1/predict", "application/json", strings.NewReader(`{"inputs": []}`))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var e struct {
		Expected struct {
			InputShape []int `json:"input_shape"`
		} `json:"expected"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || len(e.Expected.InputShape) == 0 {
		return nil, fmt.Errorf("the server does not say its input shape (%d, %v)", resp.StatusCode, err)
	}
	return e.Expected.InputShape, nil
}

// batches reads the batch-size histogram's count and sum from /metrics.
func batches(url string) ([2]float64, error) {
	var cs [2]float64
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return cs, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	found := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		i := -1
		switch f[0] {
		case "pipe_serve_batch_size_count":
			i = 0
		case "pipe_serve_batch_size_sum":
			i = 1
		}
		if i >= 0 {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return cs, err
			}
			cs[i] = v
			found++
		}
	}
	if found != 2 {
		return cs, errors.New("/metrics has no pipe_serve_batch_size histogram")
	}
	return cs, sc.Err()
}

func print(w io.Writer, rep report) {
	fmt.Fprintf(w, "pipe serve on loopback, %d cores, load average %s at the start and %s at the end; %s per level\n",
		rep.Cores, rep.LoadAvg[0], rep.LoadAvg[1], rep.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tbatching\tclients\treq/s\tsamples/s\tp50 ms\tp99 ms\tmean batch\t503\terrors\t")
	for _, r := range rep.Rows {
		on := "off"
		if r.Batching {
			on = "on"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%d\t\n", r.Model, on, r.Clients, r.RequestsPerS, r.SamplesPerS, r.P50Ms, r.P99Ms, r.MeanBatch, r.Shed, r.Errors)
	}
	tw.Flush()
}

func round(x float64) float64 { return math.Round(x*100) / 100 }

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
