package serve

import (
	"fmt"
	"image"
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
// reset), within the plan's decode memory: Decodes of DecodeBytes, twice
// over for the garbage the collector lets grow (GOGC 100) beside what is
// live, plus the bodies and 64 MiB for the runtime and the handlers.
// Without the decode slots each image is held decoded at once: 48 of
// 32 MiB, 1.5 GiB.
func TestImageBurstStaysWithinThePlan(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 48 images of 4 Mpixel")
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident memory: %v", err)
	}
	p, _ := tinyPlan(t)
	sp := p.Serve
	cfg := FromPlan(sp)
	cfg.MaxBatch = 8
	s := newServer(t, cfg)
	side := 1
	for int64(side*2*side*2) <= sp.MaxDecodePixels {
		side *= 2
	}
	// 16-bit RGB: 8 bytes a pixel decoded, 32 MiB at 2048x2048.
	img := image.NewRGBA64(image.Rect(0, 0, side, side))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	body := pngOf(t, img)
	img = nil
	const n = 48
	runtime.GC()
	debug.FreeOSMemory()
	base, baseLive := procKiB(t, "VmRSS"), liveHeap()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := postResult(t, s, "image/png", body)
			codes[i] = res.StatusCode
		}()
	}
	wg.Wait()
	peak := procKiB(t, "VmHWM")
	runtime.GC()
	after, live := procKiB(t, "VmRSS"), liveHeap()
	debug.FreeOSMemory()
	freed := procKiB(t, "VmRSS")
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("image %d: status %d", i, c)
		}
	}
	decodes := sp.Decodes * sp.DecodeBytes
	bound := 2*decodes + n*int64(len(body)) + 64<<20
	t.Logf("%d images of %dx%d (%d KiB each), %d decodes of %s planned (%s): resident %s before, peak %s (+%s, bound +%s); after a GC %s (%s live), after FreeOSMemory %s",
		n, side, side, len(body)>>10, sp.Decodes, planner.FormatBytes(sp.DecodeBytes), planner.FormatBytes(decodes),
		mib(base), mib(peak), mib(peak-base), mib(bound), mib(after), mib(live), mib(freed))
	// Nothing of an image's full size outlives its request.
	if live > baseLive+16<<20 {
		t.Errorf("after the burst and a collection %s of heap is live, %s before it: a decoded image is still referenced", mib(live), mib(baseLive))
	}
	if peak-base > bound {
		t.Errorf("a burst of %d images grew the resident memory by %s, past %s: twice the plan's %s of decodes and the bodies",
			n, mib(peak-base), mib(bound), planner.FormatBytes(decodes))
	}
}

// liveHeap is the heap the last collection found live.
func liveHeap() int64 {
	m := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(m)
	return int64(m[0].Value.Uint64())
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
