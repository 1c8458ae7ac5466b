package torch

import (
	"errors"
	"fmt"
	"time"

	"pipe/dataset/samples"
	"pipe/engine"
)

// Memory implements engine.Model. The torch engine's memory is measured by
// its device and its workers' OS (DeviceMemory); these are the sizes of
// the state pipe keeps for it.
func (m *model) Memory() engine.MemStats {
	s := engine.MemStats{Parameters: m.state.params + m.state.buffers, Gradients: m.state.params, Optimizer: m.state.optimizer}
	s.Total = s.Parameters + s.Gradients + s.Optimizer
	return s
}

// DeviceMemory implements engine.DeviceMeasurer. After a failure, whose
// workers are gone (killed by fail when not dead), it is their figures at
// exit.
func (m *model) DeviceMemory() ([]engine.DeviceMemory, error) {
	if !m.closed && m.err != nil {
		return m.atExit()
	}
	if err := m.usable(); err != nil {
		return nil, err
	}
	if err := m.drainAll(); err != nil {
		return nil, err
	}
	var out []engine.DeviceMemory
	for k, w := range m.workers {
		r, err := m.callK(k, memoryRequest{})
		if err != nil {
			return nil, err
		}
		mr, err := decodeReply[memoryReply](r)
		if err != nil {
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

// atExit is each worker's peak resident memory as the kernel accounted
// for it when the worker was reaped: the worker cannot be asked, and its
// device's figures went with it (DeviceMemory.AtExit). A figure no larger
// than pipe's own peak at the worker's start may be pipe's, which the
// worker's starts at: it is left out (0).
func (m *model) atExit() ([]engine.DeviceMemory, error) {
	var out []engine.DeviceMemory
	for k, w := range m.workers {
		select {
		case <-w.exited:
		case <-time.After(exitWait):
			return nil, fmt.Errorf("torch: rank %d (pid %d) has not exited after the failure (%w)", w.rank, w.cmd.Process.Pid, m.err)
		}
		rss := exitMaxRSS(w.cmd.ProcessState)
		if rss <= w.pipePeak {
			rss = 0
		}
		out = append(out, engine.DeviceMemory{Rank: w.rank, Device: m.deviceOf(k), MaxRSS: rss, AtExit: true})
	}
	return out, nil
}

// exitWait bounds the wait for a failed model's workers to be reaped:
// fail sends them SIGKILL, and worker.kill waits as long.
const exitWait = 10 * time.Second

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

// SavedBytes runs one training forward pass on b under autograd's
// saved-tensor hooks and returns the bytes kept for the backward pass
// (Saved). Checkpoint segments apply unless noCheckpoint.
func (m *model) SavedBytes(b *samples.Batch, noCheckpoint bool) (Saved, error) {
	if err := m.usable(); err != nil {
		return Saved{}, err
	}
	if err := m.drainAll(); err != nil {
		return Saved{}, err
	}
	ref, slot, _, err := m.fill(0, b, 0, b.N)
	if err != nil {
		return Saved{}, err
	}
	w := m.workers[0]
	if err := w.send(savedRequest{batchRef: ref, NoCheckpoint: noCheckpoint}, slot, b.N); err != nil {
		return Saved{}, m.fail(err)
	}
	r, err := m.reply(0)
	if err != nil {
		return Saved{}, err
	}
	if err := replyErr(r, w.rank); err != nil {
		return Saved{}, err
	}
	sr, err := decodeReply[savedReply](r)
	if err != nil {
		return Saved{}, err
	}
	s := Saved{Bytes: sr.Bytes, ByDtype: sr.ActivationsByDtype, Nodes: make([]SavedPart, len(m.g.Nodes))}
	for k, p := range sr.Nodes {
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

// TimePlain times the benchmark's reference on a torch engine model: a
// plain PyTorch training loop (zero_grad, forward, loss, backward, step)
// on the model's own network and optimizer and a copy of b, inside the
// worker, warm untimed steps and then steps timed one by one, in
// milliseconds. It trains the model.
func TimePlain(mod engine.Model, b *samples.Batch, lr float64, warm, steps int) ([]float64, error) {
	m, ok := mod.(*model)
	if !ok {
		return nil, errors.New("torch: not a torch engine model")
	}
	if m.world > 1 {
		// Rank 0 alone would wait in DDP's all-reduce for ranks that
		// never step: the plain loop times one process.
		return nil, fmt.Errorf("torch: the plain loop times one process; this model trains on %d (build it without data parallelism)", m.world)
	}
	if err := m.drainAll(); err != nil {
		return nil, err
	}
	ref, slot, _, err := m.fill(0, b, 0, b.N)
	if err != nil {
		return nil, err
	}
	w := m.workers[0]
	if err := w.send(timePlainRequest{batchRef: ref, LR: lr, Warmup: warm, Steps: steps}, slot, b.N); err != nil {
		return nil, m.fail(err)
	}
	r, err := m.reply(0)
	if err != nil {
		return nil, err
	}
	if err := replyErr(r, w.rank); err != nil {
		return nil, err
	}
	out, err := decodeReply[timePlainReply](r)
	if err != nil {
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

// TorchVersion is the torch version of a torch engine model's worker
// ("" for another model).
func TorchVersion(mod engine.Model) string {
	if m, ok := mod.(*model); ok && len(m.workers) > 0 {
		return m.workers[0].hello.Torch
	}
	return ""
}
