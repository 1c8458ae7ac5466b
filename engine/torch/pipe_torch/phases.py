"""Where a training command's time goes in the worker, when pipe's
environment sets PIPE_TORCH_PHASES=1 (engine/torch/phases.go)."""

import os
import time

import torch


def enabled():
    return os.environ.get("PIPE_TORCH_PHASES") == "1"


class Phases:
    """A command's time, from its line read to its reply: copy (the
    batches' views of the shared memory, or their copies to the device
    queued), queue (forward, backward and optimizer step as the host runs
    them: on CUDA the kernels' launch), device (on CUDA the kernels' time
    between two events on the stream, read only once they have finished,
    so a reply may carry an earlier command's; on the CPU the compute,
    which is the queue's time itself) and host (the rest: reading the
    command, the checks, the readback, the reply's making)."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.events = []  # (start, end) of steps whose device time is not read yet
        self.start()

    def start(self):
        self.t0 = time.perf_counter()
        self.copy = self.queue = 0.0
        self.steps = 0
        self.mark = None

    def begin_step(self):
        ev = None
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
        self.mark = ev

    def end_step(self):
        self.steps += 1
        if self.cuda and self.mark is not None:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.events.append((self.mark, ev))
        self.mark = None

    def take(self):
        total = time.perf_counter() - self.t0
        queue_ms = 1e3 * self.queue
        if self.cuda:
            device, n, left = 0.0, 0, []
            for a, b in self.events:
                if b.query():
                    device += a.elapsed_time(b)
                    n += 1
                else:
                    left.append((a, b))
            self.events = left
        else:
            device, n, queue_ms = queue_ms, self.steps, 0.0
        return {"steps": self.steps, "total_ms": 1e3 * total, "copy_ms": 1e3 * self.copy, "queue_ms": queue_ms,
                "host_ms": 1e3 * total - 1e3 * self.copy - 1e3 * self.queue, "device_ms": device, "device_steps": n}
