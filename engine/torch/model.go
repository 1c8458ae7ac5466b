package torch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"pipe/dataset"
	"pipe/engine"
	"pipe/engine/weights"
	"pipe/stdlib"
)

// Backend is the torch engine: it builds a model in PyTorch, computed by
// one Python worker per device that pipe starts and drives. With
// NProcPerNode above 1 (or NNodes above 1) the workers join one process
// group and train with DistributedDataParallel; pipe splits every batch
// between them.
type Backend struct {
	// Python is the interpreter to run: --python, else PIPE_PYTHON, else
	// python3 (Python resolves it).
	Python string
	// NProcPerNode is the number of workers this pipe starts, one a device
	// (0 or 1: one); NNodes the machines taking part (0 or 1: this one),
	// NodeRank this machine's place among them, and MasterAddr and
	// MasterPort where rank 0 meets the others (torchrun's names).
	NProcPerNode, NNodes, NodeRank int
	MasterAddr                     string
	MasterPort                     int
	// Log receives the workers' stderr at debug level.
	Log hclog.Logger
	// Env is added to the workers' environment.
	Env []string
}

var _ engine.Backend = Backend{}

// Name implements engine.Backend: plans name this engine "torch".
func (Backend) Name() string { return "torch" }

// PythonFor is the Python a run uses: flag, else $PIPE_PYTHON, else python3.
func PythonFor(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if getenv != nil {
		if v := getenv("PIPE_PYTHON"); v != "" {
			return v
		}
	}
	return "python3"
}

// Probe starts python as a worker would, and returns what its torch is
// and can do: the check pipe run makes before it reads any data.
func Probe(python string) (Info, error) {
	w, err := startWorker(python, 0, nil, nil)
	if err != nil {
		return Info{}, err
	}
	defer w.close()
	return w.hello, nil
}

// slots is the number of input slots a worker's input region holds: pipe
// fills one while the worker reads another.
const slots = 3

// model implements engine.Model and engine.Queuer over the workers.
type model struct {
	g        *stdlib.Graph
	cfg      engine.Config
	spec     *Spec
	workers  []*worker // local ranks, in order
	base     int       // the global rank of workers[0]
	world    int
	outShape []int64
	xPer     int // input floats per sample
	yPer     int // target floats per sample, at most
	layout   []stateEntry
	names    map[string]int
	applied  map[string]string
	device   string

	ws []*wstate

	died    chan struct{}
	dieOnce sync.Once
	err     error // sticky: the model is unusable after it
	closed  bool
	params  int64
	state   struct{ params, buffers, optimizer int64 }
	// gan: the worker trains a discriminator beside the model (gan.go);
	// parts are the last micro-batch's terms.
	gan   bool
	parts []float64
	// prof is the profile's state while profiling is on (profile.go).
	prof *profile
}

// wstate is pipe's side of one worker: its regions and what it owes.
type wstate struct {
	in, out, st *region
	slotFloats  int // floats per input slot
	nextSlot    int
	// losses and ns are the current step's micro-batch losses (sync
	// readback); done the steps finished, each a list of micro-batches.
	losses []float64
	ns     []int
	done   [][]micro
	// held is a step's last micro-batch, kept back until QueueStep so
	// that the optimizer step goes with it in one command.
	held *heldTrain
}

type heldTrain struct {
	msg     map[string]any
	slot, n int
}

type micro struct {
	loss float64
	n    int
}

// stateEntry is one tensor of the state, where it lies in the state region.
type stateEntry struct {
	Name   string  `json:"name"`
	Shape  []int64 `json:"shape"`
	Offset int     `json:"offset"`
	Count  int     `json:"count"`
}

func numel(s []int64) int {
	n := 1
	for _, d := range s {
		n *= int(d)
	}
	return n
}

// Build implements engine.Backend.
func (b Backend) Build(g *stdlib.Graph, cfg engine.Config) (engine.Model, error) {
	spec, err := NewSpec(g, cfg, 0)
	if err != nil {
		return nil, err
	}
	// pipe's initial weights (package weights), the native engine's
	// too, so that a run moves between the engines; a graph with an op
	// that package does not declare starts from the worker's own seeded
	// initialisation (init has no tensors then).
	init, err := weights.Initial(g, cfg.Seed, cfg.Optimizer)
	if errors.Is(err, engine.ErrUnsupported) {
		init, err = engine.State{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("torch: pipe's initial weights: %w", err)
	}
	nproc, nnodes := max(b.NProcPerNode, 1), max(b.NNodes, 1)
	world := nproc * nnodes
	if cfg.Engine.WorldSize > 0 && cfg.Engine.WorldSize != world {
		return nil, fmt.Errorf("torch: the plan is for %d devices, and this run starts %d (%d a node on %d nodes); plan with the same --nproc-per-node and --nnodes", cfg.Engine.WorldSize, world, nproc, nnodes)
	}
	if b.NodeRank < 0 || b.NodeRank >= nnodes {
		return nil, fmt.Errorf("torch: --node-rank %d is outside the %d nodes", b.NodeRank, nnodes)
	}
	m := &model{g: g, cfg: cfg, spec: spec, base: b.NodeRank * nproc, world: world, outShape: g.OutShape(),
		xPer: numel(g.Input), applied: map[string]string{}, died: make(chan struct{})}
	m.yPer = max(numel(m.outShape), 1)
	m.params = g.Params()
	if err := m.start(b, nproc); err != nil {
		m.Close()
		return nil, err
	}
	if err := m.build(b, init); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// start starts the local workers, all at once (importing torch takes
// seconds), and checks that they can run what the plan asks.
func (m *model) start(b Backend, nproc int) error {
	m.workers = make([]*worker, nproc)
	errs := make([]error, nproc)
	var wg sync.WaitGroup
	for k := range nproc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := slices.Clone(b.Env)
			if m.cfg.Threads > 0 {
				env = append(env, fmt.Sprintf("OMP_NUM_THREADS=%d", m.cfg.Threads))
			}
			m.workers[k], errs[k] = startWorker(b.Python, m.base+k, env, b.Log)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		var se *StartError
		if errors.As(err, &se) {
			return se
		}
		return err
	}
	for _, w := range m.workers {
		go func() {
			<-w.exited
			m.dieOnce.Do(func() { close(m.died) })
		}()
	}
	h := m.workers[0].hello
	dev := m.cfg.Device
	if dev == "" {
		dev = "cpu"
	}
	if strings.HasPrefix(dev, "cuda") {
		if !h.CUDA {
			return fmt.Errorf("torch: the plan is for a CUDA GPU, but the torch of %s (%s) sees none (CUDA %q); run on a machine with one, or plan with --device cpu",
				h.Executable, h.Torch, h.CUDAVersion)
		}
		if nproc > h.CUDADevices {
			return fmt.Errorf("torch: --nproc-per-node %d asks for %d GPUs, and this machine has %d", nproc, nproc, h.CUDADevices)
		}
		idx := 0
		if i := strings.IndexByte(dev, ':'); i >= 0 {
			fmt.Sscan(dev[i+1:], &idx)
		}
		if nproc == 1 && idx >= h.CUDADevices {
			return fmt.Errorf("torch: %s does not exist; this machine has %d GPUs (cuda:0 to cuda:%d)", dev, h.CUDADevices, h.CUDADevices-1)
		}
	}
	if m.world > 1 {
		be := m.cfg.Engine.Backend
		if be == "" {
			be = "gloo"
			if strings.HasPrefix(dev, "cuda") {
				be = "nccl"
			}
		}
		if (be == "gloo" && !h.Gloo) || (be == "nccl" && !h.NCCL) || !h.Distributed {
			return fmt.Errorf("torch: data parallelism over %s, which the torch of %s (%s) does not have", be, h.Executable, h.Torch)
		}
		m.cfg.Engine.Backend = be
	}
	return nil
}

// deviceOf is the device of local rank k.
func (m *model) deviceOf(k int) string {
	dev := m.cfg.Device
	switch {
	case dev == "" || dev == "cpu":
		return "cpu"
	case len(m.workers) > 1 || dev == "cuda":
		return fmt.Sprintf("cuda:%d", k)
	}
	return dev
}

// build makes the regions, builds the model in every worker and loads
// pipe's initial state into it.
func (m *model) build(b Backend, init engine.State) error {
	m.names = map[string]int{}
	for _, t := range init.Tensors {
		m.addState(t.Name, t.Shape)
	}
	m.ws = make([]*wstate, len(m.workers))
	for k := range m.workers {
		ws := &wstate{slotFloats: max(m.cfg.Batch, 1) * (m.xPer + 2*m.yPer)}
		m.ws[k] = ws
		var err error
		if ws.in, err = newRegion("in", slots*4*ws.slotFloats); err != nil {
			return err
		}
		if ws.out, err = newRegion("out", 4*max(m.cfg.Batch, 1)*numel(m.outShape)); err != nil {
			return err
		}
		if err := m.mapRegions(k, ws.in, ws.out); err != nil {
			return err
		}
	}
	// Every rank is sent its build before any is waited for: with data
	// parallelism, each waits in init_process_group for the others.
	for k, w := range m.workers {
		s := *m.spec
		s.Engine.Device = m.deviceOf(k)
		if m.world > 1 {
			port := b.MasterPort
			if port == 0 {
				port = 29500
			}
			addr := b.MasterAddr
			if addr == "" {
				addr = "127.0.0.1"
			}
			bucket := float64(m.cfg.Engine.BucketBytes) / (1 << 20)
			if bucket <= 0 {
				bucket = 25
			}
			s.Engine.Distributed = &Distributed{Backend: m.cfg.Engine.Backend, Rank: m.base + k, WorldSize: m.world,
				MasterAddr: addr, MasterPort: port, BucketMB: bucket, TimeoutS: 300}
		}
		if err := w.send(map[string]any{"cmd": "build", "spec": &s}, -1, 0); err != nil {
			return err
		}
	}
	for k, w := range m.workers {
		r, err := m.reply(k)
		if err != nil {
			return err
		}
		if err := replyErr(r, w.rank); err != nil {
			return fmt.Errorf("torch: building the model: %w", err)
		}
		if k == 0 {
			for key, v := range r.Applied {
				m.applied[key] = v
			}
			m.device = r.Device
		}
		if r.Params != m.params {
			return fmt.Errorf("torch: the worker's model has %d parameters, pipe's graph %d", r.Params, m.params)
		}
	}
	own := len(init.Tensors) == 0
	if own {
		// The worker's own weights: its layout is the state's, and rank
		// 0's weights are every rank's.
		r, err := m.callK(0, map[string]any{"cmd": "layout"})
		if err != nil {
			return err
		}
		var lr struct {
			Layout []stateEntry `json:"layout"`
		}
		if err := jsonUnmarshal(r.raw, &lr); err != nil {
			return err
		}
		for _, e := range lr.Layout {
			m.addState(e.Name, e.Shape)
		}
	}
	size := 0
	if n := len(m.layout); n > 0 {
		size = m.layout[n-1].Offset + 4*m.layout[n-1].Count
	}
	for k, ws := range m.ws {
		var err error
		if ws.st, err = newRegion("state", size); err != nil {
			return err
		}
		if err := m.mapRegions(k, ws.st); err != nil {
			return err
		}
	}
	if own {
		if len(m.workers) == 1 {
			return nil
		}
		st, err := m.state0()
		if err != nil {
			return err
		}
		init = st
	}
	return m.SetState(init)
}

// addState appends a tensor of the state to the layout.
func (m *model) addState(name string, shape []int64) {
	off, count := 0, numel(shape)
	if n := len(m.layout); n > 0 {
		off = m.layout[n-1].Offset + 4*m.layout[n-1].Count
	}
	m.names[name] = len(m.layout)
	m.layout = append(m.layout, stateEntry{Name: name, Shape: slices.Clone(shape), Offset: off, Count: count})
	name = strings.TrimPrefix(name, ganPrefix)
	switch {
	case strings.HasPrefix(name, "optimizer."):
		m.state.optimizer += int64(4 * count)
	case strings.HasSuffix(name, ".running_mean") || strings.HasSuffix(name, ".running_var"):
		m.state.buffers += int64(4 * count)
	default:
		m.state.params += int64(4 * count)
	}
}

// mapRegions maps shared-memory regions into local rank k's worker and
// unlinks their files, which the mappings keep.
func (m *model) mapRegions(k int, rs ...*region) error {
	for _, r := range rs {
		if _, err := m.callK(k, map[string]any{"cmd": "map", "region": r.name, "path": r.path, "size": r.size()}); err != nil {
			return err
		}
		r.unlink()
	}
	return nil
}

// reply reads local rank k's next reply, watching every worker: a worker
// that dies ends the wait (another may be blocked in a collective with
// it), and then every worker is stopped.
func (m *model) reply(k int) (response, error) {
	w := m.workers[k]
	if len(w.outstanding) == 0 {
		return response{}, errors.New("torch: no command is waiting for a reply")
	}
	// A reply already here wins over a death: Go picks among ready cases
	// at random.
	ready := func() (response, bool) {
		select {
		case r, ok := <-w.replies:
			if ok {
				w.outstanding = w.outstanding[1:]
				return r, true
			}
		default:
		}
		return response{}, false
	}
	if r, ok := ready(); ok {
		return r, nil
	}
	select {
	case r, ok := <-w.replies:
		if ok {
			w.outstanding = w.outstanding[1:]
			return r, nil
		}
		return response{}, m.fail(w.died())
	case <-m.died:
		if r, ok := ready(); ok { // it came with the exit
			return r, nil
		}
		for _, o := range m.workers {
			select {
			case <-o.exited:
				return response{}, m.fail(o.died())
			default:
			}
		}
		return response{}, m.fail(errors.New("torch: a worker exited"))
	}
}

// fail makes err the model's sticky error and stops every worker.
func (m *model) fail(err error) error {
	if m.err == nil {
		m.err = err
	}
	for _, w := range m.workers {
		if w.dead == nil {
			w.dead = m.err
			go w.kill()
		}
	}
	return m.err
}

// handle reads one reply of local rank k and files what it says: a
// micro-batch's loss, a finished step.
func (m *model) handle(k int) error {
	w, ws := m.workers[k], m.ws[k]
	s := w.outstanding[0]
	r, err := m.reply(k)
	if err != nil {
		return err
	}
	if err := replyErr(r, w.rank); err != nil {
		return err
	}
	if k == 0 {
		m.keepSpans(s, r.Spans)
	}
	if s.cmd == "train" || s.cmd == "train+step" {
		if r.Loss != nil {
			ws.losses = append(ws.losses, float64(*r.Loss))
			ws.ns = append(ws.ns, s.n)
		}
		if len(r.GAN) > 0 {
			m.parts = r.GAN
		}
	}
	switch s.cmd {
	case "step", "train+step":
		if m.cfg.Engine.LossReadback != "lagged" {
			var st []micro
			for i, l := range ws.losses {
				st = append(st, micro{loss: l, n: ws.ns[i]})
			}
			ws.done = append(ws.done, st)
			ws.losses, ws.ns = nil, nil
		}
		ws.done = append(ws.done, doneOf(r.Done)...)
	case "flush":
		ws.done = append(ws.done, doneOf(r.Done)...)
	}
	return nil
}

func doneOf(ds []doneStep) [][]micro {
	var out [][]micro
	for _, d := range ds {
		var st []micro
		for i, l := range d.Losses {
			n := 0
			if i < len(d.N) {
				n = d.N[i]
			}
			st = append(st, micro{loss: float64(l), n: n})
		}
		out = append(out, st)
	}
	return out
}

// sendHeld sends the micro-batches kept back for their step's command.
func (m *model) sendHeld() error {
	for k, ws := range m.ws {
		if ws == nil { // still being set up
			continue
		}
		if h := ws.held; h != nil {
			ws.held = nil
			if err := m.workers[k].send(h.msg, h.slot, h.n); err != nil {
				return m.fail(err)
			}
		}
	}
	return nil
}

// drainAll reads every outstanding reply of every worker.
func (m *model) drainAll() error {
	if err := m.sendHeld(); err != nil {
		return err
	}
	for k, w := range m.workers {
		for len(w.outstanding) > 0 {
			if err := m.handle(k); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *model) usable() error {
	if m.closed {
		return errors.New("torch: the model is closed")
	}
	return m.err
}

// shard is local rank k's rows of a batch of n: the batch is cut into
// world contiguous runs whose sizes differ by at most one.
func (m *model) shard(n, k int) (lo, hi int) {
	r := m.base + k
	q, rem := n/m.world, n%m.world
	lo = r*q + min(r, rem)
	hi = lo + q
	if r < rem {
		hi++
	}
	return lo, hi
}

// fill copies rows [lo, hi) of b into a free input slot of local rank k
// and returns the command's batch references. A rank with no rows (a
// batch smaller than the world) is given the batch's first rows again
// with scale 0: DistributedDataParallel needs every rank in every
// backward pass, and its gradient adds nothing.
func (m *model) fill(k int, b *dataset.Batch, lo, hi int) (msg map[string]any, slot, n int, err error) {
	ws, w := m.ws[k], m.workers[k]
	n = hi - lo
	if n > m.cfg.Batch {
		return nil, 0, 0, fmt.Errorf("%w: %d samples for a model built for micro-batches of %d", engine.ErrBadBatch, n, m.cfg.Batch)
	}
	slot = ws.nextSlot
	ws.nextSlot = (ws.nextSlot + 1) % slots
	// The slot is free once the command that read it has replied.
	for slices.ContainsFunc(w.outstanding, func(s sent) bool { return s.slot == slot }) {
		if err := m.handle(k); err != nil {
			return nil, 0, 0, err
		}
	}
	yPer, mPer := 0, 0
	if b.N > 0 {
		yPer, mPer = len(b.Y)/b.N, len(b.Mask)/b.N
	}
	if b.N*m.xPer != len(b.X) {
		return nil, 0, 0, fmt.Errorf("%w: the batch's inputs hold %d values for %d samples of %v", engine.ErrBadBatch, len(b.X), b.N, m.g.Input)
	}
	if yPer > m.yPer || mPer > m.yPer {
		return nil, 0, 0, fmt.Errorf("%w: the batch's targets hold %d values a sample; the model's output has %d", engine.ErrBadBatch, yPer, m.yPer)
	}
	base := slot * ws.slotFloats
	cap := m.cfg.Batch
	put := func(part int, src []float32, per int) []int {
		if src == nil {
			return nil
		}
		off := base + part
		dst := ws.in.floats(4*off, n*per)
		copy(dst, src[lo*per:hi*per])
		return []int{4 * off, n * per}
	}
	msg = map[string]any{"n": n}
	msg["x"] = put(0, b.X, m.xPer)
	if yr := put(cap*m.xPer, b.Y, yPer); yr != nil {
		msg["y"] = yr
	}
	if mr := put(cap*(m.xPer+m.yPer), b.Mask, mPer); mr != nil {
		msg["mask"] = mr
	}
	return msg, slot, n, nil
}

// QueueTrain implements engine.Queuer.
func (m *model) QueueTrain(b *dataset.Batch, scale float64, zero, last bool) error {
	if err := m.usable(); err != nil {
		return err
	}
	if b == nil || b.N <= 0 {
		return fmt.Errorf("%w: an empty batch", engine.ErrBadBatch)
	}
	for k, w := range m.workers {
		lo, hi := m.shard(b.N, k)
		s := scale * float64(hi-lo) * float64(m.world) / float64(b.N)
		if hi == lo {
			lo, hi, s = 0, min(2, b.N), 0
		}
		msg, slot, n, err := m.fill(k, b, lo, hi)
		if err != nil {
			return err
		}
		if s == 0 {
			n = 0 // its loss counts for nothing
		}
		msg["cmd"] = "train"
		msg["scale"] = s
		msg["zero"] = zero
		msg["sync"] = last
		if k == 0 && m.prof != nil {
			msg["profile"] = true
		}
		if last {
			m.ws[k].held = &heldTrain{msg: msg, slot: slot, n: n}
			continue
		}
		if err := w.send(msg, slot, n); err != nil {
			return m.fail(err)
		}
	}
	return nil
}

// QueueStep implements engine.Queuer.
func (m *model) QueueStep(clip, lr float64) error {
	if err := m.usable(); err != nil {
		return err
	}
	for k, w := range m.workers {
		step := map[string]any{"lr": lr, "clip": clip}
		if h := m.ws[k].held; h != nil {
			m.ws[k].held = nil
			h.msg["step"] = step
			if err := w.sendAs(h.msg, "train+step", h.slot, h.n); err != nil {
				return m.fail(err)
			}
			continue
		}
		step["cmd"] = "step"
		if err := w.send(step, -1, 0); err != nil {
			return m.fail(err)
		}
	}
	return nil
}

// Results implements engine.Queuer.
func (m *model) Results(wait bool) ([]engine.StepResult, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	if wait && m.cfg.Engine.LossReadback == "lagged" {
		for _, w := range m.workers {
			if err := w.send(map[string]any{"cmd": "flush"}, -1, 0); err != nil {
				return nil, m.fail(err)
			}
		}
	}
	err := m.drainAll()
	return m.collect(), err
}

// collect combines the ranks' finished steps: a micro-batch's loss is
// the mean of the ranks' losses weighted by their samples.
func (m *model) collect() []engine.StepResult {
	steps := math.MaxInt
	for _, ws := range m.ws {
		steps = min(steps, len(ws.done))
	}
	var out []engine.StepResult
	for i := 0; i < steps; i++ {
		var res engine.StepResult
		for j := 0; ; j++ {
			var sum float64
			var n, have int
			for _, ws := range m.ws {
				if j < len(ws.done[i]) {
					have++
					mc := ws.done[i][j]
					if mc.n > 0 {
						sum += mc.loss * float64(mc.n)
						n += mc.n
					}
				}
			}
			if have == 0 {
				break
			}
			if n > 0 {
				res.Losses = append(res.Losses, sum/float64(n))
			} else {
				res.Losses = append(res.Losses, math.NaN())
			}
		}
		out = append(out, res)
	}
	for _, ws := range m.ws {
		ws.done = ws.done[steps:]
	}
	return out
}

// TrainStep implements engine.Model.
func (m *model) TrainStep(b *dataset.Batch, scale float64) (float64, error) {
	if err := m.QueueTrain(b, scale, false, true); err != nil {
		return 0, err
	}
	if err := m.drainAll(); err != nil {
		return 0, err
	}
	var sum float64
	var n int
	for _, ws := range m.ws {
		if len(ws.losses) == 0 {
			continue
		}
		l := ws.losses[len(ws.losses)-1]
		c := ws.ns[len(ws.ns)-1]
		ws.losses, ws.ns = ws.losses[:len(ws.losses)-1], ws.ns[:len(ws.ns)-1]
		sum += l * float64(c)
		n += c
	}
	if n == 0 {
		return math.NaN(), errors.New("torch: the worker returned no loss (lagged readback: use the Queuer interface)")
	}
	return sum / float64(n), nil
}

// Step implements engine.Model.
func (m *model) Step(lr float64) error {
	if err := m.QueueStep(0, lr); err != nil {
		return err
	}
	if err := m.drainAll(); err != nil {
		return err
	}
	for _, ws := range m.ws {
		ws.done = nil
	}
	return nil
}

// ZeroGrad implements engine.Model: the next micro-batch zeroes the
// gradients before it adds its own.
func (m *model) ZeroGrad() {
	if m.usable() != nil {
		return
	}
	for _, w := range m.workers {
		_ = w.send(map[string]any{"cmd": "zero"}, -1, 0)
	}
}

// ClipGradNorm implements engine.Model.
func (m *model) ClipGradNorm(max float64) (float64, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	if err := m.drainAll(); err != nil {
		return 0, err
	}
	var norm float64
	for k := range m.workers {
		r, err := m.callK(k, map[string]any{"cmd": "clip", "max": max})
		if err != nil {
			return 0, err
		}
		if k == 0 && r.Norm != nil {
			norm = float64(*r.Norm)
		}
	}
	return norm, nil
}

// callK sends a command to local rank k and returns its reply.
func (m *model) callK(k int, msg map[string]any) (response, error) {
	w := m.workers[k]
	if err := m.sendHeld(); err != nil {
		return response{}, err
	}
	for len(w.outstanding) > 0 {
		if err := m.handle(k); err != nil {
			return response{}, err
		}
	}
	if err := w.send(msg, -1, 0); err != nil {
		return response{}, m.fail(err)
	}
	r, err := m.reply(k)
	if err != nil {
		return r, err
	}
	return r, replyErr(r, w.rank)
}

// Eval implements engine.Model: the first local rank evaluates the whole
// batch, the model as rank 0 holds it.
func (m *model) Eval(b *dataset.Batch, out []float32) (float64, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	if err := m.drainAll(); err != nil {
		return 0, err
	}
	if b == nil || b.N <= 0 {
		return 0, fmt.Errorf("%w: an empty batch", engine.ErrBadBatch)
	}
	ws, w := m.ws[0], m.workers[0]
	if err := m.fit(0, b.N, out != nil); err != nil {
		return 0, err
	}
	saved := m.cfg.Batch
	m.cfg.Batch = max(saved, b.N)
	msg, slot, _, err := m.fill(0, b, 0, b.N)
	m.cfg.Batch = saved
	if err != nil {
		return 0, err
	}
	if b.Y == nil {
		delete(msg, "y")
		delete(msg, "mask")
	}
	o := b.N * numel(m.outShape)
	if out != nil {
		if len(out) < o {
			return 0, fmt.Errorf("%w: the output buffer holds %d values; %d samples of %v need %d", engine.ErrBadBatch, len(out), b.N, m.outShape, o)
		}
		msg["out"] = []int{0, o}
	}
	msg["cmd"] = "eval"
	if m.prof != nil {
		msg["profile"] = true
	}
	if err := w.send(msg, slot, b.N); err != nil {
		return 0, m.fail(err)
	}
	s := w.outstanding[len(w.outstanding)-1]
	r, err := m.reply(0)
	if err != nil {
		return 0, err
	}
	if err := replyErr(r, w.rank); err != nil {
		return 0, err
	}
	m.keepSpans(s, r.Spans)
	if out != nil {
		copy(out[:o], ws.out.floats(0, o))
	}
	var loss float64
	if r.Loss != nil {
		loss = float64(*r.Loss)
	}
	return loss, nil
}

// fit grows local rank k's regions for a batch of n samples, the output
// region too when outputs are wanted.
func (m *model) fit(k, n int, outputs bool) error {
	ws := m.ws[k]
	if need := n * (m.xPer + 2*m.yPer); need > ws.slotFloats {
		if err := m.remap(k, &ws.in, slots*4*need); err != nil {
			return err
		}
		ws.slotFloats = need
	}
	if o := 4 * n * numel(m.outShape); outputs && o > ws.out.size() {
		return m.remap(k, &ws.out, o)
	}
	return nil
}

// remap replaces local rank k's region *r with a new one of size bytes,
// mapped by the worker before the old one is let go.
func (m *model) remap(k int, r **region, size int) error {
	name := (*r).name
	nr, err := newRegion(name, size)
	if err != nil {
		return err
	}
	if _, err := m.callK(k, map[string]any{"cmd": "map", "region": name, "path": nr.path, "size": nr.size()}); err != nil {
		nr.close()
		return err
	}
	nr.unlink()
	(*r).close()
	*r = nr
	return nil
}

// OutShape implements engine.Model.
func (m *model) OutShape() []int64 { return slices.Clone(m.outShape) }

// Precision implements engine.Model: what autocast computes in, or fp32
// (tf32 when the plan allows it on a GPU).
func (m *model) Precision() string {
	if a := m.cfg.Engine.Autocast; a != "" {
		return a
	}
	if m.cfg.Engine.TF32 && strings.HasPrefix(m.device, "cuda") {
		return "tf32"
	}
	return "fp32"
}

// State implements engine.Model: rank 0's tensors, in pipe's names and
// layouts, so that either engine resumes from the checkpoint.
func (m *model) State() engine.State {
	st, err := m.state0()
	if err != nil {
		m.fail(err)
		return engine.State{Counters: map[string]int64{}}
	}
	return st
}

func (m *model) state0() (engine.State, error) {
	if err := m.usable(); err != nil {
		return engine.State{}, err
	}
	if err := m.drainAll(); err != nil {
		return engine.State{}, err
	}
	r, err := m.callK(0, map[string]any{"cmd": "get_state", "layout": m.layout})
	if err != nil {
		return engine.State{}, err
	}
	st := engine.State{Counters: r.Counters}
	reg := m.ws[0].st
	for _, e := range m.layout {
		st.Tensors = append(st.Tensors, engine.Tensor{Name: e.Name, Shape: slices.Clone(e.Shape),
			Data: slices.Clone(reg.floats(e.Offset, e.Count))})
	}
	return st, nil
}

// SetState implements engine.Model.
func (m *model) SetState(s engine.State) error {
	if err := m.usable(); err != nil {
		return err
	}
	if m.gan && !slices.ContainsFunc(s.Tensors, func(t engine.Tensor) bool { return strings.HasPrefix(t.Name, ganPrefix) }) {
		return errNoGAN
	}
	seen := make([]bool, len(m.layout))
	for _, t := range s.Tensors {
		i, ok := m.names[t.Name]
		if !ok {
			names := make([]string, 0, 6)
			for _, e := range m.layout[:min(6, len(m.layout))] {
				names = append(names, e.Name)
			}
			return fmt.Errorf("state: unknown tensor %q (the model has %s, …)", t.Name, strings.Join(names, ", "))
		}
		e := m.layout[i]
		if !slices.Equal(t.Shape, e.Shape) || len(t.Data) != e.Count {
			return fmt.Errorf("state: %s has shape %v and %d values; the model's is %v", t.Name, t.Shape, len(t.Data), e.Shape)
		}
		seen[i] = true
	}
	var missing []string
	for i, ok := range seen {
		if !ok {
			missing = append(missing, m.layout[i].Name)
		}
	}
	if len(missing) > 0 {
		if len(missing) > 6 {
			missing = append(missing[:6], "…")
		}
		return fmt.Errorf("state: missing %d tensors: %s", len(missing), strings.Join(missing, ", "))
	}
	for _, k := range []string{"optimizer.step", "exec.micro_step"} {
		if _, ok := s.Counters[k]; !ok {
			return fmt.Errorf("state: missing counter %s", k)
		}
	}
	if err := m.drainAll(); err != nil {
		return err
	}
	for k, ws := range m.ws {
		for _, t := range s.Tensors {
			e := m.layout[m.names[t.Name]]
			copy(ws.st.floats(e.Offset, e.Count), t.Data)
		}
		if _, err := m.callK(k, map[string]any{"cmd": "set_state", "layout": m.layout, "counters": s.Counters}); err != nil {
			return err
		}
		ws.losses, ws.ns, ws.done = nil, nil, nil
	}
	return nil
}

// Memory implements engine.Model. The torch engine's memory is measured by
// its device and its workers' OS (DeviceMemory); these are the sizes of
// the state pipe keeps for it.
func (m *model) Memory() engine.MemStats {
	s := engine.MemStats{Parameters: m.state.params + m.state.buffers, Gradients: m.state.params, Optimizer: m.state.optimizer}
	s.Total = s.Parameters + s.Gradients + s.Optimizer
	return s
}

// DeviceMemory implements engine.DeviceMeasurer.
func (m *model) DeviceMemory() ([]engine.DeviceMemory, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	if err := m.drainAll(); err != nil {
		return nil, err
	}
	var out []engine.DeviceMemory
	for k, w := range m.workers {
		r, err := m.callK(k, map[string]any{"cmd": "memory"})
		if err != nil {
			return nil, err
		}
		var mr memoryReply
		if err := jsonUnmarshal(r.raw, &mr); err != nil {
			return nil, err
		}
		dev := mr.Device
		if dev == "" {
			dev = m.deviceOf(k)
		}
		out = append(out, engine.DeviceMemory{Rank: w.rank, Device: dev, MaxAllocated: mr.MaxAllocated, MaxReserved: mr.MaxReserved,
			Used: mr.Used, Total: mr.Total, MaxRSS: mr.MaxRSS})
	}
	return out, nil
}

// Applied implements engine.Applier.
func (m *model) Applied() map[string]string {
	out := make(map[string]string, len(m.applied))
	for k, v := range m.applied {
		out[k] = v
	}
	return out
}

// Saved is what autograd keeps for the backward pass of one training
// forward pass and its loss, each storage once, as saved-tensor hooks see
// it: PyTorch's own account, for the whole batch.
type Saved struct {
	// Bytes is split into "activations", "parameters", "buffers" (a
	// batchnorm's running statistics) and "parameter_casts" (autocast's
	// low-precision copies of the weights).
	Bytes map[string]int64
	// ByDtype is the activations by dtype ("float32", "bfloat16", "int64").
	ByDtype map[string]int64
	// Nodes is the activations per graph node, by node ID: a saved
	// storage that is a node's output, or a view of one, counts for the
	// node that made it; any other (a cast copy, a mask, indices, a
	// norm's statistics, attention's inner tensors) for the node running
	// when it was saved. Node 0's is the input batch, when kept.
	Nodes []SavedPart
	// Loss is what the loss keeps (its log-softmax, its targets).
	Loss SavedPart
}

// SavedPart is the saved bytes of one node or of the loss, by dtype.
type SavedPart struct {
	Bytes  int64            `json:"bytes"`
	Dtypes map[string]int64 `json:"dtypes"`
}

// SavedBytes runs one training forward pass on b under autograd's
// saved-tensor hooks and returns the bytes kept for the backward pass
// (Saved). Checkpoint segments apply unless noCheckpoint.
func (m *model) SavedBytes(b *dataset.Batch, noCheckpoint bool) (Saved, error) {
	if err := m.usable(); err != nil {
		return Saved{}, err
	}
	if err := m.drainAll(); err != nil {
		return Saved{}, err
	}
	msg, slot, _, err := m.fill(0, b, 0, b.N)
	if err != nil {
		return Saved{}, err
	}
	msg["cmd"] = "saved"
	msg["no_checkpoint"] = noCheckpoint
	w := m.workers[0]
	if err := w.send(msg, slot, b.N); err != nil {
		return Saved{}, m.fail(err)
	}
	r, err := m.reply(0)
	if err != nil {
		return Saved{}, err
	}
	if err := replyErr(r, w.rank); err != nil {
		return Saved{}, err
	}
	s := Saved{Bytes: r.Bytes, ByDtype: r.ActivationsByDtype, Nodes: make([]SavedPart, len(m.g.Nodes))}
	for k, p := range r.SavedNodes {
		if k == "loss" {
			s.Loss = p
			continue
		}
		var id int
		if _, err := fmt.Sscan(k, &id); err != nil || id < 0 || id >= len(s.Nodes) {
			return Saved{}, fmt.Errorf("torch: saved bytes for an unknown node %q", k)
		}
		s.Nodes[id] = p
	}
	return s, nil
}

// Close implements engine.Model: the workers quit (or are killed), and the
// shared memory is released.
func (m *model) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var wg sync.WaitGroup
	for _, w := range m.workers {
		if w == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.close()
		}()
	}
	wg.Wait()
	for _, ws := range m.ws {
		if ws != nil {
			ws.in.close()
			ws.out.close()
			ws.st.close()
		}
	}
	return nil
}

// TimePlain times the benchmark's reference on a torch engine model: a
// plain PyTorch training loop (zero_grad, forward, loss, backward, step)
// on the model's own network and optimizer and a copy of b, inside the
// worker, warm untimed steps and then steps timed one by one, in
// milliseconds. It trains the model.
func TimePlain(mod engine.Model, b *dataset.Batch, lr float64, warm, steps int) ([]float64, error) {
	m, ok := mod.(*model)
	if !ok {
		return nil, errors.New("torch: not a torch engine model")
	}
	if err := m.drainAll(); err != nil {
		return nil, err
	}
	msg, slot, _, err := m.fill(0, b, 0, b.N)
	if err != nil {
		return nil, err
	}
	msg["cmd"], msg["lr"], msg["warmup"], msg["steps"] = "time_plain", lr, warm, steps
	w := m.workers[0]
	if err := w.send(msg, slot, b.N); err != nil {
		return nil, m.fail(err)
	}
	r, err := m.reply(0)
	if err != nil {
		return nil, err
	}
	if err := replyErr(r, w.rank); err != nil {
		return nil, err
	}
	var out struct {
		MS []float64 `json:"ms"`
	}
	if err := jsonUnmarshal(r.raw, &out); err != nil {
		return nil, err
	}
	return out.MS, nil
}

// PIDs returns the process IDs of a torch engine model's workers (nil
// for another model): the benchmark leaves their CPU time out of what it
// counts as other processes' load.
func PIDs(mod engine.Model) []int {
	m, ok := mod.(*model)
	if !ok {
		return nil
	}
	var out []int
	for _, w := range m.workers {
		if w != nil && w.cmd.Process != nil {
			out = append(out, w.cmd.Process.Pid)
		}
	}
	return out
}
