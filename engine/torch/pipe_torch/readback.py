"""Lagged loss readback that never waits for the step just queued."""

import torch


class Pending:
    """A loss on its way to the host: a non-blocking copy into pinned
    memory and an event recorded after it. item() waits for that event
    alone, where .item() on the device tensor would wait for every kernel
    queued on the stream since, the step just queued included."""

    __slots__ = ("buf", "event", "pool")

    def __init__(self, buf, event, pool):
        self.buf, self.event, self.pool = buf, event, pool

    def item(self):
        self.event.synchronize()
        v = self.buf.item()
        self.pool.append(self.buf)
        return v


class Readback:
    """Where lagged losses go: on CUDA through Pending, elsewhere the
    detached tensor itself (the CPU computes synchronously)."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.pool = []  # pinned one-element buffers free for reuse

    def stash(self, loss):
        loss = loss.detach()
        if not self.cuda:
            return loss
        buf = self.pool.pop() if self.pool else torch.empty(1, dtype=torch.float32, pin_memory=True)
        buf.copy_(loss.reshape(1), non_blocking=True)
        ev = torch.cuda.Event()
        ev.record()
        return Pending(buf, ev, self.pool)
