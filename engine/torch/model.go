package torch

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

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
	// MasterPort where rank 0 meets the others (torchrun's names; 0: a
	// free port when every rank is on this machine, else 29500).
	NProcPerNode, NNodes, NodeRank int
	MasterAddr                     string
	MasterPort                     int
	// LocalRank offsets this pipe's devices on its machine: under a
	// launcher that starts a pipe per device, pipe k of a machine trains
	// on cuda:LocalRank. AgentStore says the launcher's agent holds the
	// rendezvous store at the master's port, so rank 0 joins it too.
	LocalRank  int
	AgentStore bool
	// RendezvousTimeout bounds the wait for every rank to join (default
	// DefaultRendezvousTimeout); CollectiveTimeout bounds each collective,
	// an all-reduce a stalled peer never joins (DefaultCollectiveTimeout).
	RendezvousTimeout, CollectiveTimeout time.Duration
	// Log receives the workers' stderr at debug level.
	Log hclog.Logger
	// Env is added to the workers' environment.
	Env []string
}

var _ engine.Backend = Backend{}

// Name implements engine.Backend: plans name this engine "torch".
func (Backend) Name() string { return "torch" }

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
	// restarts is the largest launcher restart count of the ranks that
	// met at the build (engine.Worlder).
	restarts int

	ws []*wstate

	died chan struct{}
	// cancel is Config.Cancel. While the build waits for its replies (the
	// ranks meeting, building) it ends the wait at once; after, the run
	// loop stops between steps, and a closed cancel (interrupted) ends
	// only a wait on a stalled peer (stall.go).
	cancel                <-chan struct{}
	building, interrupted bool
	// slowest is the longest wait for each command's reply so far (a
	// step's first excluded: it warms up), what a wait after an
	// interrupt is held to.
	slowest map[string]time.Duration
	// stopAsked: this process was asked to stop, and its next step says
	// so; stopping: a step's reply said some rank was (engine.Stopper).
	stopAsked, stopping bool
	// localRank is Backend.LocalRank.
	localRank int
	// collective is the timeout each collective runs under.
	collective time.Duration
	// stallTick paces the reports of a reply that takes long (queue.go).
	stallTick *time.Ticker
	dieOnce   sync.Once
	err       error // sticky: the model is unusable after it
	closed    bool
	params    int64
	state     struct{ params, buffers, optimizer int64 }
	// gan: the worker trains a discriminator beside the model (gan.go);
	// parts are the last micro-batch's terms.
	gan   bool
	parts []float64
	// prof is the profile's state while profiling is on (profile.go).
	prof *profile
	// phases sums rank 0's commands' phase timings (phases.go).
	phases engine.StepPhases
	// resident: the workers keep the training set (Keep), and batches
	// of indices alone are gathered there.
	resident bool
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
	req     trainRequest
	slot, n int
}

type micro struct {
	loss float64
	n    int
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
	m, err := b.newModel(g, cfg)
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
	if err := m.start(b, max(b.NProcPerNode, 1)); err != nil {
		m.Close()
		return nil, err
	}
	if err := m.build(b, init); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// newModel is the model of g and cfg for b's world, with no workers yet.
func (b Backend) newModel(g *stdlib.Graph, cfg engine.Config) (*model, error) {
	spec, err := NewSpec(g, cfg, 0)
	if err != nil {
		return nil, err
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
		xPer: numel(g.Input), applied: map[string]string{}, died: make(chan struct{}), slowest: map[string]time.Duration{}}
	m.yPer = max(numel(m.outShape), 1)
	m.params = g.Params()
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
			env = allocatorEnv(env, m.cfg.Device)
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
	m.watchWorkers()
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

// watchWorkers closes m.died when any of its workers exits.
func (m *model) watchWorkers() {
	for _, w := range m.workers {
		go func() {
			<-w.exited
			m.dieOnce.Do(func() { close(m.died) })
		}()
	}
}

// deviceOf is the device of local rank k.
func (m *model) deviceOf(k int) string {
	dev := m.cfg.Device
	switch {
	case dev == "" || dev == "cpu":
		return "cpu"
	case len(m.workers) > 1 || dev == "cuda" || m.localRank > 0:
		return fmt.Sprintf("cuda:%d", m.localRank+k)
	}
	return dev
}

// build makes the regions, builds the model in every worker and loads
// pipe's initial state into it.
func (m *model) build(b Backend, init engine.State) error {
	m.cancel, m.building = m.cfg.Cancel, true
	m.localRank = b.LocalRank
	m.collective = time.Duration(seconds(b.CollectiveTimeout, DefaultCollectiveTimeout)) * time.Second
	defer func() { m.building = false }()
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
	port := 0
	if m.world > 1 {
		var err error
		if port, err = rendezvousPort(b.MasterPort, m.world == len(m.workers)); err != nil {
			return err
		}
	}
	for k, w := range m.workers {
		s := *m.spec
		s.Engine.Device = m.deviceOf(k)
		if m.world > 1 {
			addr := b.MasterAddr
			if addr == "" {
				addr = "127.0.0.1"
			}
			bucket := float64(m.cfg.Engine.BucketBytes) / (1 << 20)
			if bucket <= 0 {
				bucket = 25
			}
			s.Engine.Distributed = &Distributed{Backend: m.cfg.Engine.Backend, Rank: m.base + k, WorldSize: m.world,
				MasterAddr: addr, MasterPort: port, BucketMB: bucket,
				TimeoutS: seconds(b.CollectiveTimeout, DefaultCollectiveTimeout), RendezvousTimeoutS: seconds(b.RendezvousTimeout, DefaultRendezvousTimeout),
				AgentStore: b.AgentStore, AgreeStop: len(m.workers) < m.world,
				SyncBatchnorm: m.cfg.Engine.SyncBatchnorm, Restarts: m.cfg.LauncherRestarts}
		}
		if err := w.send(buildRequest{Spec: &s}, -1, 0); err != nil {
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
		br, err := decodeReply[buildReply](r)
		if err != nil {
			return err
		}
		if k == 0 {
			for key, v := range br.Applied {
				m.applied[key] = v
			}
			m.device = br.Device
		}
		m.restarts = max(m.restarts, m.cfg.LauncherRestarts, br.WorldRestarts)
		if br.Params != m.params {
			return fmt.Errorf("torch: the worker's model has %d parameters, pipe's graph %d", br.Params, m.params)
		}
	}
	own := len(init.Tensors) == 0
	if own {
		// The worker's own weights: its layout is the state's, and rank
		// 0's weights are every rank's.
		r, err := m.callK(0, layoutRequest{})
		if err != nil {
			return err
		}
		lr, err := decodeReply[layoutReply](r)
		if err != nil {
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
		if _, err := m.callK(k, mapRequest{Region: r.name, Path: r.path, Size: r.size()}); err != nil {
			return err
		}
		r.unlink()
	}
	return nil
}

func (m *model) usable() error {
	if m.closed {
		return errors.New("torch: the model is closed")
	}
	return m.err
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

// Applied implements engine.Applier.
func (m *model) Applied() map[string]string {
	out := make(map[string]string, len(m.applied))
	for k, v := range m.applied {
		out[k] = v
	}
	return out
}

// Close implements engine.Model: the workers quit (or are killed), and the
// shared memory is released.
func (m *model) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	if m.stallTick != nil {
		m.stallTick.Stop()
	}
	m.everyWorker((*worker).close)
	m.closeRegions()
	return nil
}

// closeRegions closes the shared memory m made for its workers.
func (m *model) closeRegions() {
	for _, ws := range m.ws {
		if ws != nil {
			ws.in.close()
			ws.out.close()
			ws.st.close()
		}
	}
}

// rendezvousPort is the port rank 0 listens on: the one asked for, else
// a free one when every rank runs here (two runs on one machine must not
// meet at the same port), else torchrun's 29500, which the other
// machines assume too.
func rendezvousPort(asked int, local bool) (int, error) {
	if asked > 0 {
		return asked, nil
	}
	if !local {
		return 29500, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("torch: finding a free port for the workers to meet at: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// The data-parallel timeouts when the Backend gives none: long enough for
// a slow machine to start its workers, short enough that a missing rank
// is named within minutes.
const (
	DefaultRendezvousTimeout = 300 * time.Second
	DefaultCollectiveTimeout = 300 * time.Second
)

func seconds(d, def time.Duration) int {
	if d <= 0 {
		d = def
	}
	return max(int(d/time.Second), 1)
}

// everyWorker runs f on every started worker at once and waits for all:
// closing or killing them one after another would add their waits up.
func (m *model) everyWorker(f func(*worker)) {
	var wg sync.WaitGroup
	for _, w := range m.workers {
		if w == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w)
		}()
	}
	wg.Wait()
}
