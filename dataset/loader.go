package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"pipe/dataset/source"
)

// The loader turns a Dataset into batches for one epoch at a time.
//
// Epoch e's order and augmentations are drawn from (Seed, e) and the
// sample index alone, so the same options give the same batches with 0
// workers or 16. Workers fill whole batches into a ring of Workers ×
// Prefetch slots, which Next takes in order; buffers are recycled through
// Release. A read error ends the epoch and is returned on every later
// Next; Close or a cancelled context stops the workers.
// Details: docs/design/loader.md.

// Prefetcher is implemented by datasets whose reads wait on a network (a
// geotiff source read from a URL). The loader calls Prefetch with a
// batch's samples when it schedules the batch, up to Workers × Prefetch
// batches ahead of training; the dataset starts fetching their bytes
// concurrently and returns at once, so that a batch costs about one round
// trip rather than one per sample. It only warms a cache: the batches
// are the same with it or without.
type Prefetcher interface {
	Prefetch(indices []int)
}

// LoaderOptions configure a Loader.
type LoaderOptions struct {
	// BatchSize is the number of samples per batch (at least 1).
	BatchSize int
	// DropLast leaves out the last batch of an epoch when it is smaller.
	DropLast bool
	// Shuffle visits the samples in a new permutation every epoch.
	Shuffle bool
	// Seed seeds the shuffle and the augmentations.
	Seed int64
	// Workers is the number of goroutines filling batches; 0 fills them
	// in Next.
	Workers int
	// Prefetch is how many batches per worker may be ready ahead of the
	// consumer (at least 1; 2 when 0).
	Prefetch int
	// Augment lists augmentations (flip_h, flip_v, rot90, crop) applied to
	// each sample; leave it empty for validation and prediction.
	Augment []string
	// Rows, when set, gives the rows [lo, hi) of a batch of n samples that
	// this process reads (a node's share of a data-parallel batch,
	// engine.Capabilities.Rows); the others are never read.
	Rows func(n int) (lo, hi int)
	// Held is how many batches the consumer holds before it releases
	// them (a unit of steps, plan.StepsPerCommand); the free list keeps
	// room for them, so that none released is dropped and made again.
	Held int
	// IndicesOnly fills each batch's Indices alone, with the samples'
	// indices in the root dataset (Root), and reads no sample: the
	// samples lie on the device, which gathers them (plan.DataOnDevice).
	// X, Y and Mask are empty.
	IndicesOnly bool
}

// Loader reads a Dataset in batches. Its methods may be called from one
// goroutine at a time; one epoch's iterator should be closed before the
// next is started.
type Loader struct {
	ds      Dataset
	opt     LoaderOptions
	xs, ys  int
	hasMask bool
	aug     *augmenter
	err     error
	free    chan *Batch
	read    atomic.Int64 // samples handed out, every epoch
}

// SamplesRead is how many samples the loader has read and handed out in
// batches (a run's training samples, or with Rows its share of them).
// Batches read ahead and never handed out, at most Workers × Prefetch at
// an epoch's end, are not counted: their number depends on timing.
func (l *Loader) SamplesRead() int64 { return l.read.Load() }

// NewLoader returns a loader of ds. Invalid options (an augmentation that
// does not fit the samples' shape, a batch size below 1) are reported by
// the first Next of every epoch.
func NewLoader(ds Dataset, opt LoaderOptions) *Loader {
	if opt.Prefetch < 1 {
		opt.Prefetch = 2
	}
	opt.Workers = max(opt.Workers, 0)
	l := &Loader{ds: ds, opt: opt, xs: prod(ds.XShape()), ys: prod(ds.YShape()), hasMask: ds.HasMask()}
	if opt.BatchSize < 1 {
		l.err = fmt.Errorf("loader: batch size %d; it must be at least 1", opt.BatchSize)
	}
	if l.err == nil && opt.IndicesOnly && len(opt.Augment) > 0 {
		l.err = fmt.Errorf("loader: augmentations %v need the samples read on the host, and the loader reads indices only", opt.Augment)
	}
	if l.err == nil {
		l.aug, l.err = newAugmenter(opt.Augment, ds.XShape(), ds.YShape())
	}
	l.free = make(chan *Batch, max(opt.Workers, 1)*opt.Prefetch+2+max(opt.Held, 0))
	return l
}

// Batches is the number of batches in an epoch.
func (l *Loader) Batches() int {
	n := l.ds.Len()
	if l.opt.BatchSize < 1 {
		return 0
	}
	if l.opt.DropLast {
		return n / l.opt.BatchSize
	}
	return (n + l.opt.BatchSize - 1) / l.opt.BatchSize
}

// Epoch starts epoch e (0-based) and returns its iterator, which must be
// closed.
func (l *Loader) Epoch(e int) Iterator { return l.EpochContext(context.Background(), e) }

// EpochContext is Epoch whose workers also stop when ctx is cancelled;
// Next then returns ctx's error.
func (l *Loader) EpochContext(ctx context.Context, e int) Iterator { return l.EpochFrom(ctx, e, 0) }

// EpochFrom is EpochContext starting at batch first (a run resumed inside
// the epoch): the batches before it are in the epoch's order, unread.
func (l *Loader) EpochFrom(ctx context.Context, e, first int) Iterator {
	ctx, cancel := context.WithCancel(ctx)
	it := &iterator{l: l, epoch: e, ctx: ctx, cancel: cancel, nb: l.Batches(), next: max(first, 0), err: l.err}
	it.pf, _ = l.ds.(Prefetcher)
	it.prefetched = it.next
	n := l.ds.Len()
	if l.opt.Shuffle {
		it.order = source.NewRNG(source.SaltShuffle, uint64(l.opt.Seed), uint64(e)).Perm(n)
	} else {
		it.order = make([]int, n)
		for i := range it.order {
			it.order[i] = i
		}
	}
	if it.err != nil || l.opt.Workers == 0 || it.nb == 0 {
		it.aug = l.aug.clone()
		return it
	}
	depth := l.opt.Workers * l.opt.Prefetch
	it.slots = make([]chan result, depth)
	for i := range it.slots {
		it.slots[i] = make(chan result, 1)
	}
	it.tokens = make(chan struct{}, depth)
	jobs := make(chan int)
	it.wg.Go(func() { // dispatcher
		defer close(jobs)
		for k := it.next; k < it.nb; k++ {
			select {
			case it.tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			it.prefetch(k)
			select {
			case jobs <- k:
			case <-ctx.Done():
				return
			}
		}
	})
	for range l.opt.Workers {
		aug := l.aug.clone()
		it.wg.Go(func() {
			for {
				var k int
				var ok bool
				select {
				case k, ok = <-jobs:
					if !ok {
						return
					}
				case <-ctx.Done():
					return
				}
				b, err := it.fill(k, aug)
				// The slot is free: batch k−depth was consumed before
				// batch k's token was given.
				it.slots[k%depth] <- result{b, err}
			}
		})
	}
	return it
}

type result struct {
	b   *Batch
	err error
}

type iterator struct {
	l      *Loader
	epoch  int
	order  []int
	nb     int
	next   int
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  []chan result
	tokens chan struct{}
	aug    *augmenter // for Workers = 0
	err    error      // sticky
	closed bool

	pf         Prefetcher // the dataset's, or nil
	prefetched int        // Workers = 0: the first batch not yet prefetched
}

// prefetch hands batch k's samples (this process's rows of it) to the
// dataset's Prefetcher.
func (it *iterator) prefetch(k int) {
	if it.pf == nil || k >= it.nb {
		return
	}
	l := it.l
	lo := k * l.opt.BatchSize
	hi := min(lo+l.opt.BatchSize, len(it.order))
	if l.opt.Rows != nil {
		a, c := l.opt.Rows(hi - lo)
		if a < 0 || a > c || c > hi-lo {
			return
		}
		lo, hi = lo+a, lo+c
	}
	it.pf.Prefetch(it.order[lo:hi])
}

func (a *augmenter) clone() *augmenter {
	if a == nil {
		return nil
	}
	c := *a
	c.tmp = nil
	return &c
}

// Next returns the next batch of the epoch, io.EOF after the last, or
// the error that ended the epoch.
func (it *iterator) Next(ctx context.Context) (*Batch, error) {
	if it.err != nil {
		return nil, it.err
	}
	if it.closed {
		return nil, errors.New("loader: Next after Close")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := it.ctx.Err(); err != nil {
		return nil, err
	}
	if it.next >= it.nb {
		return nil, io.EOF
	}
	k := it.next
	if it.slots == nil {
		if k == it.prefetched {
			it.prefetch(k)
		}
		it.prefetch(k + 1)
		it.prefetched = k + 2
		b, err := it.fill(k, it.aug)
		if err != nil {
			it.err = err
			return nil, err
		}
		it.next++
		it.l.read.Add(int64(b.N))
		return b, nil
	}
	select {
	case r := <-it.slots[k%len(it.slots)]:
		<-it.tokens
		if r.err != nil {
			it.err = r.err
			it.cancel()
			return nil, r.err
		}
		it.next++
		it.l.read.Add(int64(r.b.N))
		return r.b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-it.ctx.Done():
		return nil, it.ctx.Err()
	}
}

// Release hands a batch back for reuse.
func (it *iterator) Release(b *Batch) {
	if b == nil {
		return
	}
	select {
	case it.l.free <- b:
	default:
	}
}

// Close stops the epoch's goroutines and waits for them.
func (it *iterator) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	it.cancel()
	it.wg.Wait()
	for _, s := range it.slots {
		select {
		case r := <-s:
			it.Release(r.b)
		default:
		}
	}
	return nil
}

// batch takes a batch from the free list, or allocates one.
func (l *Loader) batch() *Batch {
	bs := l.opt.BatchSize
	select {
	case b := <-l.free:
		b.X, b.Y, b.Indices = b.X[:cap(b.X)], b.Y[:cap(b.Y)], b.Indices[:cap(b.Indices)]
		if b.Mask != nil {
			b.Mask = b.Mask[:cap(b.Mask)]
		}
		return b
	default:
	}
	if l.opt.IndicesOnly {
		return &Batch{X: []float32{}, Y: []float32{}, Indices: make([]int, bs)}
	}
	b := &Batch{X: make([]float32, bs*l.xs), Y: make([]float32, bs*l.ys), Indices: make([]int, bs)}
	if l.hasMask {
		b.Mask = make([]float32, bs*l.ys)
	}
	return b
}

// fill reads batch k.
func (it *iterator) fill(k int, aug *augmenter) (b *Batch, err error) {
	l := it.l
	lo := k * l.opt.BatchSize
	hi := min(lo+l.opt.BatchSize, len(it.order))
	b = l.batch()
	b.Offset, b.Global = 0, hi-lo
	if l.opt.Rows != nil {
		a, c := l.opt.Rows(hi - lo)
		if a < 0 || a > c || c > hi-lo {
			it.Release(b)
			return nil, fmt.Errorf("loader: rows [%d, %d) of a batch of %d", a, c, hi-lo)
		}
		b.Offset, lo, hi = a, lo+a, lo+c
	}
	n := hi - lo
	b.N = n
	if l.opt.IndicesOnly {
		b.Indices = b.Indices[:n]
		for j := range n {
			_, b.Indices[j] = Root(l.ds, it.order[lo+j])
		}
		return b, nil
	}
	b.X, b.Y, b.Indices = b.X[:n*l.xs], b.Y[:n*l.ys], b.Indices[:n]
	if b.Mask != nil {
		b.Mask = b.Mask[:n*l.ys]
	}
	for j := range n {
		if err := it.ctx.Err(); err != nil {
			it.Release(b)
			return nil, err
		}
		idx := it.order[lo+j]
		b.Indices[j] = idx
		x := b.X[j*l.xs : (j+1)*l.xs]
		y := b.Y[j*l.ys : (j+1)*l.ys]
		var m []float32
		if b.Mask != nil {
			m = b.Mask[j*l.ys : (j+1)*l.ys]
		}
		if err := safeRead(l.ds, idx, x, y, m); err != nil {
			it.Release(b)
			return nil, fmt.Errorf("epoch %d, sample %d: %w", it.epoch, idx, err)
		}
		if aug != nil {
			aug.apply(source.NewRNG(source.SaltAugment, uint64(l.opt.Seed), uint64(it.epoch), uint64(idx)), x, y, m)
		}
	}
	return b, nil
}

// safeRead calls ds.Read and turns a panic into an error.
func safeRead(ds Dataset, i int, x, y, m []float32) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading failed: %v", r)
		}
	}()
	if m == nil {
		m = []float32{}
	}
	return ds.Read(i, x, y, m)
}
