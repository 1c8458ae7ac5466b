package serve

import (
	"fmt"
	"image"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"

	"pipe/planner"
)

// procKiB is a line of /proc/self/status in bytes: the OS's count.
func procKiB(t *testing.T, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n << 10
		}
	}
	t.Skipf("no %s in /proc/self/status", key)
	return 0
}

// A burst of images at the plan's decode limit, all at once, keeps the
// process's resident memory, as the OS measures it (VmHWM, its peak since
// reset), within what the plan counts: the bodies the requests hold
// (each request's, in the queue's memory), the plan's decode memory
// (Decodes of DecodeBytes) and 64 MiB for the runtime and the handlers.
// Once the burst is answered the process gives back what it grew by, to
// within one decode (VmRSS, with no collection by the test). Two bursts:
// the report's, 24 photos of 2048x2048 (noise: 12 MiB bodies, 16 MiB
// decoded), and 48 flat 16-bit images (small bodies, 32 MiB decoded).
// Without the decode slots each image is held decoded at once; with
// them, and the collector left to itself (GOGC 100), the garbage of
// finished decodes and of the bodies grew the peak to twice what was
// live, and the heap kept it once idle (24 photos: +650 MiB, +630 MiB
// after, where the plan counts 160 MiB of decodes and 288 MiB of bodies).
func TestImageBurstStaysWithinThePlan(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 72 images of 4 Mpixel")
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident memory: %v", err)
	}
	p, _ := tinyPlan(t)
	sp := p.Serve
	side := 1
	for int64(side*2*side*2) <= sp.MaxDecodePixels {
		side *= 2
	}
	photo := image.NewRGBA(image.Rect(0, 0, side, side))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range photo.Pix {
		photo.Pix[i] = byte(rng.Uint32())
		if i%4 == 3 {
			photo.Pix[i] = 0xff
		}
	}
	// 16-bit RGB: 8 bytes a pixel decoded, 32 MiB at 2048x2048.
	flat := image.NewRGBA64(image.Rect(0, 0, side, side))
	for i := range flat.Pix {
		flat.Pix[i] = 0x80
	}
	bursts := []struct {
		name string
		n    int
		body []byte
	}{
		{"photos", 24, pngOf(t, photo)},
		{"flat 16-bit", 48, pngOf(t, flat)},
	}
	photo, flat = nil, nil
	cfg := FromPlan(sp)
	cfg.MaxBatch = 8
	s := newServer(t, cfg)
	for _, b := range bursts {
		t.Run(b.name, func(t *testing.T) {
			runtime.GC()
			debug.FreeOSMemory()
			base, baseLive := procKiB(t, "VmRSS"), liveHeap()
			if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			codes := make([]int, b.n)
			for i := range b.n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res := postResult(t, s, "image/png", b.body)
					codes[i] = res.StatusCode
				}()
			}
			wg.Wait()
			peak, after := procKiB(t, "VmHWM"), procKiB(t, "VmRSS")
			runtime.GC()
			live := liveHeap()
			for i, c := range codes {
				if c != http.StatusOK {
					t.Fatalf("image %d: status %d", i, c)
				}
			}
			decodes := sp.Decodes * sp.DecodeBytes
			bodies := int64(b.n) * int64(len(b.body))
			bound := bodies + decodes + 64<<20
			t.Logf("%d images of %dx%d (%d KiB each), %d decodes of %s planned (%s): resident %s before, peak %s (+%s, bound +%s: %s of bodies); after %s (+%s); %s live after a GC",
				b.n, side, side, len(b.body)>>10, sp.Decodes, planner.FormatBytes(sp.DecodeBytes), planner.FormatBytes(decodes),
				mib(base), mib(peak), mib(peak-base), mib(bound), mib(bodies), mib(after), mib(after-base), mib(live))
			// Nothing of an image's full size outlives its request.
			if live > baseLive+16<<20 {
				t.Errorf("after the burst and a collection %s of heap is live, %s before it: a decoded image is still referenced", mib(live), mib(baseLive))
			}
			if peak-base > bound {
				t.Errorf("a burst of %d images grew the resident memory by %s, past %s: the plan's %s of decodes, %s of bodies and 64 MiB",
					b.n, mib(peak-base), mib(bound), planner.FormatBytes(decodes), mib(bodies))
			}
			if after-base > sp.DecodeBytes {
				t.Errorf("once the burst was answered the process held %s more than before it, more than one decode's %s: the heap kept what the burst grew it by",
					mib(after-base), planner.FormatBytes(sp.DecodeBytes))
			}
		})
	}
}

// liveHeap is the heap the last collection found live.
func liveHeap() int64 {
	m := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(m)
	return int64(m[0].Value.Uint64())
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
