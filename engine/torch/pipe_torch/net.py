"""The network of a spec, run node by node, its optimizer and its state's
names."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import wire
from .modules import make_module
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
        self.current = None  # the node running, for out-of-memory reports
        self.current_id = None
        self.recomputing = False
        # record(i, t), when set, is told every node's output as it is
        # made (cmd_saved's attribution).
        self.record = None
        # timer, when set, times every node (Timer: pipe run --profile).
        self.timer = None

    def run_node(self, n, xs):
        op = n["op"]
        m = self.mods[n["id"]]
        if op in ("conv", "convtranspose", "dense", "lowrank_dense", "sketched_dense", "sketched_conv", "layernorm",
                  "instancenorm", "groupnorm",
                  "maxpool", "avgpool", "dropout", "class_token", "pos_embed", "random_attention"):
            return m(xs[0])
        if op == "attention":
            # nn.MultiheadAttention as torchvision's encoder block calls
            # it: self-attention, no attention weights returned.
            # A causal mask is True above the diagonal: those scores
            # are left out of the softmax.
            mask = None
            if n["args"].get("causal"):
                t = xs[0].shape[1]
                mask = torch.ones(t, t, dtype=torch.bool, device=xs[0].device).triu(1)
            return m(xs[0], xs[0], xs[0], need_weights=False, attn_mask=mask)[0]
        if op == "tokens":
            # torchvision's _process_input: [N, D, H, W] to [N, H·W, D],
            # a view.
            x = xs[0]
            return x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        if op == "select_token":
            return xs[0][:, 0]
        if op == "mean_tokens":
            return xs[0].mean(dim=1)
        if op == "batchnorm":
            if self.recomputing:
                # A recomputed segment normalises with the batch's own
                # statistics, exactly as the first pass did, without
                # updating the running statistics a second time: the
                # same op with momentum 0 (running·1 + batch·0), so that
                # it saves the same tensors as the first pass, which
                # checkpoint matches one for one.
                return F.batch_norm(xs[0], m.running_mean, m.running_var, m.weight, m.bias, True, 0.0, m.eps)
            return m(xs[0])
        if op == "input":
            return xs[0]
        if op == "relu":
            return F.relu(xs[0])
        if op == "gelu":
            return F.gelu(xs[0])
        if op == "sigmoid":
            return torch.sigmoid(xs[0])
        if op == "tanh":
            return torch.tanh(xs[0])
        if op == "softmax":
            return F.softmax(xs[0], dim=1)
        if op == "flatten":
            return torch.flatten(xs[0], 1)
        if op == "leakyrelu":
            return F.leaky_relu(xs[0], n["args"]["negative_slope"])
        if op == "pixelshuffle":
            return F.pixel_shuffle(xs[0], n["args"]["upscale_factor"])
        if op == "gap":
            y = (F.adaptive_avg_pool3d if xs[0].dim() == 5 else F.adaptive_avg_pool2d)(xs[0], 1)
            if not n["args"]["keepdims"]:
                y = torch.flatten(y, 1)
            return y
        if op == "upsample":
            a = n["args"]
            kw = {"align_corners": a["align_corners"]} if a["mode"] in ("bilinear", "trilinear") else {}
            return F.interpolate(xs[0], size=tuple(n["out"][1:]), mode=a["mode"], **kw)
        if op == "concat":
            return torch.cat(xs, dim=1)
        if op == "add":
            y = xs[0]
            s = n["args"]["scale"] or 1  # 0: no scale
            if s != 1:
                y = y * s  # add's scale: a scaled residual
            for t in xs[1:]:
                y = y + t
            return y
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
            self.current, self.current_id = n["name"], i
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
        self.current, self.current_id = None, None
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
                    self.current, self.current_id = n["name"], n["id"]
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
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"],
                               weight_decay=o["weight_decay"]), "sgd", False
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
