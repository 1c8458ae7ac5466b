"""Per-node timings of a command (pipe run --profile)."""

import time

import torch


class Timer:
    """Times a model's nodes by the clock (pipe run --profile).

    A node's forward is the clock around its run_node, the device
    synchronised before each reading. Its backward is timed with a hook on
    its output: the hook fires when the gradient of the output is complete,
    which is when the node's own backward begins, and the node's backward
    lasts until the next hook fires (the gradient of its input complete) or
    backward returns. On a chain of nodes that is exact; where branches
    join, autograd runs one branch's nodes at a time and each interval
    still goes to the node whose gradient began it. The time from
    backward's start to the first hook is the loss's own backward. A
    recomputed segment's forward runs inside the backward: it is timed as
    recompute, and cut out of the backward interval it falls in.

    spans are [node id (-1: the loss), phase, start ns, duration ns], the
    start from the command's beginning; phase 0 forward, 1 backward,
    2 recompute, 3 loss.
    """

    def __init__(self, cuda, device):
        self.cuda, self.device = cuda, device
        self.t0 = self.now()
        self.spans = []
        self.grads = []
        self.recomputed = []

    def now(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)
        return time.perf_counter_ns()

    def add(self, i, phase, t0, t1):
        self.spans.append([i, phase, t0 - self.t0, max(t1 - t0, 0)])

    def node(self, i, t0, out, recompute):
        t1 = self.now()
        if recompute:
            self.add(i, 2, t0, t1)
            self.recomputed.append((t0, t1))
            return
        self.add(i, 0, t0, t1)
        if torch.is_grad_enabled() and isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(lambda g, i=i: self.grads.append((self.now(), i)))

    def backward(self, t0, t1):
        """The spans of a backward pass that ran from t0 to t1."""
        marks = [(t0, -1)] + self.grads + [(t1, None)]
        for (a, i), (b, _) in zip(marks, marks[1:]):
            # The interval less the recomputations inside it, in pieces.
            for s, e in sorted(self.recomputed):
                if s >= b or e <= a:
                    continue
                if s > a:
                    self.spans.append([i, 3 if i == -1 else 1, a - self.t0, s - a])
                a = max(a, e)
            if b > a:
                self.spans.append([i, 3 if i == -1 else 1, a - self.t0, b - a])
        self.grads, self.recomputed = [], []
