package torch

import "pipe/engine"

// Capabilities implements engine.Model: queued steps, the devices' own
// memory figures, how the plan was applied, gan mode in the worker, the
// kernels' clock and a worker's death; over processes, the ranks' stop
// and what they said when they met.
func (m *model) Capabilities() engine.Capabilities {
	c := engine.Capabilities{Queue: m, Devices: m, Applied: m, GAN: m, GANParts: m, Profile: m, Liveness: m, Phases: m}
	if len(m.workers) < m.world {
		c.Rows = m.nodeRows
		c.Stop = m
		c.World = m
	}
	if !m.gan && m.world == 1 {
		c.Resident = m
	}
	return c
}

// RequestStop implements engine.Stopper: the next step carries it.
func (m *model) RequestStop() { m.stopAsked = true }

// Stopping implements engine.Stopper: a step's reply said some rank asked.
func (m *model) Stopping() bool { return m.stopping }

// LauncherRestarts implements engine.Worlder: the largest count the
// ranks said at the rendezvous.
func (m *model) LauncherRestarts() int { return m.restarts }

// Lost implements engine.Liveness: died closes when any worker exits.
func (m *model) Lost() <-chan struct{} { return m.died }

// Kill implements engine.Liveness: every worker's process group gets
// SIGKILL (a stopped process dies of it too); their exits close died and
// fail the calls waiting on them.
func (m *model) Kill() { m.everyWorker((*worker).kill) }

// StopTogether implements engine.Stopper: every local rank waits at the
// stop group's barrier (sent to all before any reply is read, as local
// ranks meet there too).
func (m *model) StopTogether() error {
	if err := m.usable(); err != nil {
		return err
	}
	if err := m.drainAll(); err != nil {
		return err
	}
	for _, w := range m.workers {
		if err := w.send(barrierRequest{}, -1, 0); err != nil {
			return m.fail(err)
		}
	}
	for k := range m.workers {
		r, err := m.reply(k)
		if err != nil {
			return err
		}
		if err := m.replyErr(r, k); err != nil {
			return err
		}
	}
	return nil
}
