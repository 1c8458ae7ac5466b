"""The network of a spec, run node by node, its optimizer and its state's
names."""

import torch
import torch.nn as nn

from . import wire
from .modules import FORWARDS, make_module
from .wire import Failure


def compiling():
    """Whether torch.compile is tracing the caller (torch 2.x; never on 1.13)."""
    f = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if f is None:
        f = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    return bool(f()) if f is not None else False


def module_key(name):
    """A node's name as a ModuleDict key (keys may not contain dots)."""
    return name.replace(".", "__")


class Net(nn.Module):
    """The graph of a spec, run node by node in its topological order.

    forward returns (logits, out): out is the model's output and logits
    what the loss reads, the values before a final softmax
    (cross_entropy) or sigmoid (bce), as pipe's losses do.
    """

    def __init__(self, spec):
        super().__init__()
        spec = wire.decode("Spec", spec)  # a benchmark's spec is a dict
        self.nodes = spec["nodes"]
        self.output = spec["output"]
        self.layers = nn.ModuleDict()
        for n in self.nodes:
            m = make_module(n)
            if m is not None:
                key = module_key(n["name"])
                if key in self.layers:
                    raise ValueError(f"two nodes map to the module name {key}")
                self.layers[key] = m
        self.mods = [self.layers[module_key(n["name"])] if module_key(n["name"]) in self.layers else None
                     for n in self.nodes]
        last = self.nodes[self.output]
        loss = spec["loss"]
        self.logits = self.output
        if (loss == "cross_entropy" and last["op"] == "softmax") or (loss == "bce" and last["op"] == "sigmoid"):
            self.logits = last["inputs"][0]
        # The last reader of each node, so that outputs are dropped as
        # soon as nothing reads them (autograd keeps what backward needs).
        self.last_use = {}
        for n in self.nodes:
            for j in n["inputs"]:
                self.last_use[j] = n["id"]
        self.last_use[self.output] = len(self.nodes)
        self.last_use[self.logits] = len(self.nodes)
        # Checkpoint segments: node ID ranges recomputed in backward.
        self.segments = {}
        for s in spec.get("segments") or []:
            self.segments[s["from"]] = s["to"]
        self.channels_last = False
        # The node running, for out-of-memory reports: [name, id], written
        # in place per node (an attribute write on a Module goes through
        # Module.__setattr__, about 2 µs each, twice a node every step).
        self.at = [None, None]
        self.recomputing = False
        # record(i, t), when set, is told every node's output as it is
        # made (cmd_saved's attribution).
        self.record = None
        # timer, when set, times every node (Timer: pipe run --profile).
        self.timer = None

    def run_node(self, n, xs):
        """Node n's output from its inputs xs: its op's registered forward
        (modules.FORWARDS), else its module on its one input."""
        op = n["op"]
        m = self.mods[n["id"]]
        f = FORWARDS.get(op)
        if f is not None:
            return f(self, n, m, xs)
        if m is not None:
            return m(xs[0])
        raise Failure("unsupported", f"node {n['name']}: op {op} has no torch counterpart in this worker")

    def forward(self, x):
        outs = [None] * len(self.nodes)
        i = 0
        count = len(self.nodes)
        while i < count:
            n = self.nodes[i]
            if i in self.segments and self.training and torch.is_grad_enabled():
                i = self.run_segment(i, self.segments[i], outs)
                continue
            self.at[0], self.at[1] = n["name"], i
            xs = [outs[j] for j in n["inputs"]] if n["op"] != "input" else [x]
            if self.timer is not None:
                t0 = self.timer.now()
                outs[i] = self.run_node(n, xs)
                self.timer.node(i, t0, outs[i], False)
            else:
                outs[i] = self.run_node(n, xs)
            if self.record is not None:
                self.record(i, outs[i])
            for j in n["inputs"]:
                if self.last_use.get(j) == i:
                    outs[j] = None
            i += 1
        self.at[0] = self.at[1] = None
        return outs[self.logits], outs[self.output]

    def segment_values(self, nodes, ins, leaving, tensors):
        """A checkpoint segment's outputs, without side effects."""
        local = dict(zip(ins, tensors))
        for n in nodes:
            local[n["id"]] = self.run_node(n, [local[j] for j in n["inputs"]])
        return tuple(local[k] for k in leaving)

    def run_segment(self, lo, hi, outs):
        """Nodes lo..hi under torch.utils.checkpoint: their outputs are
        dropped after the forward pass and recomputed in the backward."""
        from torch.utils.checkpoint import checkpoint
        nodes = self.nodes[lo:hi + 1]
        inside = set(range(lo, hi + 1))
        ins = sorted({j for n in nodes for j in n["inputs"] if j not in inside})
        leaving = [k for k in range(lo, hi + 1) if self.last_use.get(k, -1) > hi]
        calls = [0]

        def seg(*tensors):
            if compiling():
                # Traced once by torch.compile, which replays the graph in
                # the backward pass itself (running statistics are updated
                # once, in the forward graph): no Python state may change
                # inside torch.utils.checkpoint, or Dynamo breaks the graph.
                return self.segment_values(nodes, ins, leaving, tensors)
            calls[0] += 1
            self.recomputing = calls[0] > 1
            try:
                local = dict(zip(ins, tensors))
                for n in nodes:
                    self.at[0], self.at[1] = n["name"], n["id"]
                    xs = [local[j] for j in n["inputs"]]
                    if self.timer is not None:
                        t0 = self.timer.now()
                        local[n["id"]] = self.run_node(n, xs)
                        self.timer.node(n["id"], t0, local[n["id"]], self.recomputing)
                    else:
                        local[n["id"]] = self.run_node(n, xs)
                    if self.record is not None:
                        self.record(n["id"], local[n["id"]])
                return tuple(local[k] for k in leaving)
            finally:
                self.recomputing = False

        res = checkpoint(seg, *[outs[j] for j in ins], use_reentrant=False)
        for k, t in zip(leaving, res):
            outs[k] = t
        for j in ins:
            if self.last_use.get(j, -1) <= hi:
                outs[j] = None
        return hi + 1


def make_optimizer(o, params, fused=False):
    """The optimizer of a spec's "optimizer" with PyTorch's semantics, and
    what was made: (optimizer, description, fused)."""
    o = wire.decode("Optimizer", o)
    kind = o["kind"]
    if kind in ("adam", "adamw"):
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        kw = dict(lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=o["weight_decay"])
        if fused:
            try:
                return cls(params, fused=True, **kw), f"{kind} (fused)", True
            except (TypeError, RuntimeError) as e:
                return cls(params, **kw), f"{kind} (foreach: fused is not available: {e})", False
        return cls(params, **kw), kind, False
    if kind == "sgd":
        kw = dict(lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"], weight_decay=o["weight_decay"])
        if fused:
            try:  # torch 2.3 and later
                return torch.optim.SGD(params, fused=True, **kw), "sgd (fused)", True
            except (TypeError, RuntimeError) as e:
                return torch.optim.SGD(params, **kw), f"sgd (fused is not available: {e})", False
        return torch.optim.SGD(params, **kw), "sgd", False
    raise Failure("unsupported", f"optimizer {kind} is not built here")


def state_names(spec, net):
    """pipe's tensor names (PyTorch's state_dict keys under the node's
    name) for every parameter and buffer of net."""
    spec = wire.decode("Spec", spec)
    names = {}
    for n in spec["nodes"]:
        key = module_key(n["name"])
        if key not in net.layers:
            continue
        m = net.layers[key]
        for pname, t in list(m.named_parameters()) + list(m.named_buffers()):
            if pname == "num_batches_tracked":
                continue
            names[n["name"] + "." + pname] = t
    return names


def dead_params(spec, names):
    """The parameters the spec's zero_grad names, whose gradient is zero in
    exact arithmetic: zero_dead sets theirs to zero after each backward
    pass, as the native engine does, so that the optimizer does not step
    on rounding noise (docs/design/zero-gradients.md)."""
    return [names[n] for n in (spec.get("zero_grad") or []) if isinstance(names.get(n), nn.Parameter)]


def zero_dead(params):
    for p in params:
        if p.grad is not None:
            p.grad.zero_()
