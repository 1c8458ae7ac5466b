package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"pipe/dataset/internal/datatest"
	"runtime"
	"slices"
	"testing"
	"time"
)

// copied is a batch detached from the loader's buffers.
type copied struct {
	n          int
	x, y, mask []float32
	idx        []int
}

// collect reads one whole epoch.
func collect(t testing.TB, l *Loader, epoch int) []copied {
	t.Helper()
	it := l.Epoch(epoch)
	defer it.Close()
	var out []copied
	for {
		b, err := it.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, copied{b.N, slices.Clone(b.X), slices.Clone(b.Y), slices.Clone(b.Mask), slices.Clone(b.Indices)})
		it.Release(b)
	}
}

func equalBatches(a, b []copied) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].n != b[i].n || !slices.Equal(a[i].x, b[i].x) || !slices.Equal(a[i].y, b[i].y) ||
			!slices.Equal(a[i].mask, b[i].mask) || !slices.Equal(a[i].idx, b[i].idx) {
			return false
		}
	}
	return true
}

// memDataset is a dataset in memory: sample i is x = [C, H, W] filled
// with i + position/1000, y = i. Read fails or panics on chosen indices.
type memDataset struct {
	n, c, h, w int
	failAt     int
	panicAt    int
	reads      chan int // when set, every Read sends its index
}

func newMem(n int) *memDataset { return &memDataset{n: n, c: 2, h: 4, w: 4, failAt: -1, panicAt: -1} }

func (d *memDataset) Len() int        { return d.n }
func (d *memDataset) XShape() []int64 { return []int64{int64(d.c), int64(d.h), int64(d.w)} }
func (d *memDataset) YShape() []int64 { return []int64{} }
func (d *memDataset) Classes() int    { return d.n }
func (d *memDataset) HasMask() bool   { return false }
func (d *memDataset) Close() error    { return nil }
func (d *memDataset) Read(i int, x, y, _ []float32) error {
	if d.reads != nil {
		d.reads <- i
	}
	if i == d.failAt {
		return fmt.Errorf("disk on fire")
	}
	if i == d.panicAt {
		var m map[string]int
		m["boom"]++
	}
	for j := range x {
		x[j] = float32(i) + float32(j)/1000
	}
	y[0] = float32(i)
	return nil
}

func TestLoaderDeterministic(t *testing.T) {
	ds := newMem(103)
	base := LoaderOptions{BatchSize: 10, Shuffle: true, Seed: 42, Augment: []string{"flip_h", "flip_v", "rot90", "crop"}}
	want := collect(t, NewLoader(ds, base), 3)
	if len(want) != 11 || want[10].n != 3 {
		t.Fatalf("%d batches, last of %d; want 11 and 3", len(want), want[len(want)-1].n)
	}
	seen := map[int]bool{}
	for _, b := range want {
		for j, i := range b.idx {
			seen[i] = true
			if b.y[j] != float32(i) {
				t.Fatalf("label %v for sample %d", b.y[j], i)
			}
		}
	}
	if len(seen) != 103 {
		t.Fatalf("an epoch visits %d distinct samples, want 103", len(seen))
	}
	for _, workers := range []int{1, 2, 5} {
		for _, prefetch := range []int{1, 3} {
			opt := base
			opt.Workers, opt.Prefetch = workers, prefetch
			if got := collect(t, NewLoader(ds, opt), 3); !equalBatches(want, got) {
				t.Fatalf("workers %d prefetch %d: batches differ from 0 workers", workers, prefetch)
			}
		}
	}
	// Another epoch is another permutation; another seed too.
	if equalBatches(want, collect(t, NewLoader(ds, base), 4)) {
		t.Fatal("epochs 3 and 4 gave the same batches")
	}
	opt := base
	opt.Seed = 43
	if equalBatches(want, collect(t, NewLoader(ds, opt), 3)) {
		t.Fatal("seeds 42 and 43 gave the same batches")
	}
}

func TestLoaderOrderAndDropLast(t *testing.T) {
	ds := newMem(25)
	got := collect(t, NewLoader(ds, LoaderOptions{BatchSize: 10, DropLast: true, Workers: 2}), 0)
	if len(got) != 2 || !slices.Equal(got[1].idx, []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}) {
		t.Fatalf("unshuffled, drop last: %d batches, second %v", len(got), got[len(got)-1].idx)
	}
	if n := NewLoader(ds, LoaderOptions{BatchSize: 10}).Batches(); n != 3 {
		t.Fatalf("Batches %d, want 3", n)
	}
}

func TestLoaderReuse(t *testing.T) {
	ds := newMem(40)
	l := NewLoader(ds, LoaderOptions{BatchSize: 8, Workers: 2, Prefetch: 1})
	it := l.Epoch(0)
	defer it.Close()
	buffers := map[*float32]bool{}
	for {
		b, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		buffers[&b.X[:1][0]] = true
		it.Release(b)
	}
	// At most workers × prefetch batches are out at once, plus the one
	// being consumed.
	if len(buffers) > 3 {
		t.Fatalf("%d distinct buffers for 5 batches with Release", len(buffers))
	}
}

// Workers fill at most Workers × Prefetch batches ahead of the consumer.
func TestLoaderPrefetchBound(t *testing.T) {
	ds := newMem(200)
	ds.reads = make(chan int, 1000)
	l := NewLoader(ds, LoaderOptions{BatchSize: 4, Workers: 2, Prefetch: 2})
	it := l.Epoch(0)
	defer it.Close()
	if _, err := it.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Let the workers run as far as they may (until they have been
	// quiet for a while).
	deadline := time.Now().Add(2 * time.Second)
	last := -1
	for time.Now().Before(deadline) {
		select {
		case i := <-ds.reads:
			last = max(last, i)
			continue
		case <-time.After(100 * time.Millisecond):
		}
		break
	}
	// Batch 0 consumed; batches 1..4 may be ready: samples up to 19,
	// however long the workers are left to run.
	if last > 19 {
		t.Fatalf("workers read up to sample %d with one batch consumed; want at most 19", last)
	}
}

func TestLoaderErrors(t *testing.T) {
	for _, workers := range []int{0, 3} {
		ds := newMem(50)
		ds.failAt = 23
		it := NewLoader(ds, LoaderOptions{BatchSize: 5, Workers: workers}).Epoch(2)
		var err error
		for range 20 {
			var b *Batch
			if b, err = it.Next(context.Background()); err != nil {
				break
			}
			it.Release(b)
		}
		datatest.WantErr(t, err, "epoch 2, sample 23: disk on fire")
		if _, again := it.Next(context.Background()); again == nil || again.Error() != err.Error() {
			t.Fatalf("workers %d: the error is not sticky: %v", workers, again)
		}
		it.Close()

		ds = newMem(50)
		ds.panicAt = 7
		it = NewLoader(ds, LoaderOptions{BatchSize: 5, Workers: workers}).Epoch(0)
		for range 20 {
			if _, err = it.Next(context.Background()); err != nil {
				break
			}
		}
		datatest.WantErr(t, err, "sample 7: reading failed", "nil map")
		it.Close()
	}
	it := NewLoader(newMem(4), LoaderOptions{BatchSize: 2, Augment: []string{"spin"}}).Epoch(0)
	_, err := it.Next(context.Background())
	datatest.WantErr(t, err, `unknown augmentation "spin"`)
	it.Close()
}

// waitGoroutines waits for the goroutine count to fall to n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for range 200 {
		if runtime.NumGoroutine() <= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
}

func TestLoaderCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	ds := newMem(1000)
	l := NewLoader(ds, LoaderOptions{BatchSize: 4, Workers: 4, Prefetch: 2, Shuffle: true})
	it := l.Epoch(0)
	for range 3 {
		b, err := it.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		it.Release(b)
	}
	if runtime.NumGoroutine() < before+5 {
		t.Fatalf("%d goroutines while loading; want the dispatcher and 4 workers more than %d", runtime.NumGoroutine(), before)
	}
	it.Close()
	waitGoroutines(t, before)
	if _, err := it.Next(context.Background()); err == nil {
		t.Fatal("Next after Close succeeded")
	}
}

func TestLoaderCancel(t *testing.T) {
	before := runtime.NumGoroutine()
	ds := newMem(1000)
	l := NewLoader(ds, LoaderOptions{BatchSize: 4, Workers: 3})
	ctx, cancel := context.WithCancel(context.Background())
	it := l.EpochContext(ctx, 0)
	if _, err := it.Next(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitGoroutines(t, before)
	if _, err := it.Next(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel: %v", err)
	}
	it.Close()

	// Cancelling the context of Next alone returns its error.
	it = l.Epoch(1)
	defer it.Close()
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := it.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
}

// TestLoaderReadsItsRowsOnly: with Rows, each batch holds only the rows
// asked for, the same samples the whole batch has there, and the others
// are never read; EpochFrom starts at its batch without reading the
// batches before it.
func TestLoaderReadsItsRowsOnly(t *testing.T) {
	ds := newMem(50)
	opt := LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 7, Workers: 2}
	whole := collect(t, NewLoader(ds, opt), 1)
	half := func(n int) (int, int) { return n / 2, n } // the second half: rows 4–7, and 1 of a last batch of 2
	for _, workers := range []int{0, 2} {
		ds.reads = make(chan int, 100)
		opt.Workers, opt.Rows = workers, half
		l := NewLoader(ds, opt)
		it := l.EpochFrom(context.Background(), 1, 2)
		var got []int
		for k := 2; ; k++ {
			b, err := it.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			w := whole[k]
			if lo, _ := half(w.n); b.Offset != lo || b.Global != w.n || b.Whole() != w.n || !slices.Equal(b.Indices, w.idx[lo:]) {
				t.Fatalf("workers %d, batch %d: rows from %d of %d, %v; want from %d of %d, %v", workers, k, b.Offset, b.Global, b.Indices, lo, w.n, w.idx[lo:])
			}
			got = append(got, b.Indices...)
			it.Release(b)
		}
		it.Close()
		close(ds.reads)
		var read []int
		for i := range ds.reads {
			read = append(read, i)
		}
		slices.Sort(read)
		slices.Sort(got)
		if !slices.Equal(read, got) || int64(len(got)) != l.SamplesRead() {
			t.Errorf("workers %d: read %v (counted %d), handed out %v", workers, read, l.SamplesRead(), got)
		}
		if want := 4*4 + 1; len(got) != want { // batches 2–5 of 8, and the last of 2
			t.Errorf("workers %d: %d samples read, want %d", workers, len(got), want)
		}
	}
}

// TestLoaderKeepsHeldBatches: a consumer that holds Held batches before
// it releases them (a unit of steps) gets them back in the next unit: the
// free list drops none, so none is made again.
func TestLoaderKeepsHeldBatches(t *testing.T) {
	const held = 8
	l := NewLoader(newMem(200), LoaderOptions{BatchSize: 10, Held: held})
	it := l.Epoch(0)
	defer it.Close()
	seen := map[*Batch]bool{}
	for unit := range 2 {
		var bs []*Batch
		for range held {
			b, err := it.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if unit == 1 && !seen[b] {
				t.Fatalf("unit 2 got a batch made anew; the %d released after unit 1 were dropped", held)
			}
			seen[b] = true
			bs = append(bs, b)
		}
		for _, b := range bs {
			it.Release(b)
		}
	}
}
