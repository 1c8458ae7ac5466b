"""pipe_torch: the worker of pipe's torch engine.

pipe (exec/torch) embeds this file and starts one worker per device:

    PYTHON pipe_torch.py --worker

The worker builds a torch.nn.Module from pipe's model graph (the spec that
exec/torch writes), receives pipe's seeded initial weights, and trains,
evaluates and reports memory on pipe's command. pipe keeps the plan, the
data, the run loop, the checkpoints and the reports; the worker computes.

Protocol. One JSON object a line on stdin, {"cmd": NAME, "args": {...}},
one JSON reply a line on the process's original stdout, in order. Whatever else writes to stdout (a
library's print) is sent to stderr, so it cannot break the protocol.
Tensors never go through the pipe: batches, outputs and checkpoint tensors
live in shared-memory files (under /dev/shm) that pipe creates and both
sides map; a command names the region and the offsets.

Every reply is {"ok": true, ...} or {"ok": false, "kind": K, "error": MSG}
with kind one of: "oom" (out of memory: "node", "phase" and "memory" say
where and how much), "nonfinite" (a NaN or Inf: "step", "micro_step",
"loss", "node", "op", "param", "input"), "unsupported", "bad-batch",
"error" (anything else, with "trace").

Commands (see exec/torch/worker.go for the Go side):

    hello                        -> versions and what this torch can do
    map {region, path, size}     -> maps a shared-memory file
    build {spec}                 -> builds the model (and the process group)
    set_state {layout, counters} -> loads tensors from the "state" region
    get_state {layout}           -> writes tensors into the "state" region
    train {n, x, y, mask, scale, zero, sync}
                                 -> one micro-batch: forward, loss, backward
    step {lr, clip}              -> clips, then one optimizer step
    flush                        -> waits for the device; the losses left
    eval {n, x, y, mask, out}    -> forward in evaluation mode
    memory                       -> the device's and the process's peaks
    saved {n, x}                 -> the bytes autograd saves for backward
    quit

A micro-batch's loss is read back at once on the CPU. On a CUDA device the
plan can ask for "lagged" readback: the reply to an optimizer step carries
the losses of the step before it, so reading them never waits for the
device and the GPU always has the next step queued.

Nothing here needs more than torch (1.13 or later) and the standard
library. What only torch 2.x has (torch.compile, fused AdamW) is guarded.
"""

import json
import math
import mmap
import os
import resource
import signal
import sys
import time
import traceback

PROTOCOL = 2  # exec/torch's protocolVersion
SPEC_VERSION = 2  # exec/torch's SpecVersion
GAN_PREFIX = "discriminator."  # exec's ganPrefix: the discriminator's tensors and counters in the state

torch = None
nn = None
F = None


def import_torch():
    global torch, nn, F
    import torch as _torch
    import torch.nn as _nn
    import torch.nn.functional as _F
    torch, nn, F = _torch, _nn, _F


def version_tuple(v):
    out = []
    for part in v.split("+")[0].split("."):
        digits = ""
        for ch in part:
            if ch.isdigit():
                digits += ch
            else:
                break
        out.append(int(digits or 0))
    while len(out) < 3:
        out.append(0)
    return tuple(out[:3])


class Failure(Exception):
    """An error with a kind, reported to pipe as such."""

    def __init__(self, kind, msg, **extra):
        super().__init__(msg)
        self.kind = kind
        self.extra = extra


# ---------------------------------------------------------------------------
# The model

def module_key(name):
    """A node's name as a ModuleDict key (keys may not contain dots)."""
    return name.replace(".", "__")


def make_module(n):
    op, a, ins = n["op"], n.get("args") or {}, n["in"]
    vol = len(ins[0]) == 4 if ins else False  # [C, D, H, W]: the 3-D module
    if op == "conv" and vol:
        return nn.Conv3d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                         padding=a["padding"], bias=a["bias"])
    if op == "convtranspose" and vol:
        return nn.ConvTranspose3d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                                  padding=a["padding"], bias=a["bias"])
    if op == "maxpool" and vol:
        return nn.MaxPool3d(a["kernel_size"], stride=a["stride"], padding=a["padding"])
    if op == "conv":
        return nn.Conv2d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                         padding=a["padding"], dilation=a["dilation"], groups=a["groups"], bias=a["bias"])
    if op == "convtranspose":
        return nn.ConvTranspose2d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                                  padding=a["padding"], groups=a.get("groups", 1), bias=a["bias"])
    if op == "dense":
        return nn.Linear(ins[0][-1], a["out_features"], bias=a["bias"])
    if op == "lowrank_dense":
        return LowRank(ins[0][-1], a["out_features"], a["terms"], a["rank"], a["bias"])
    if op == "sketched_dense":
        return SKLinear(ins[0][-1], a["out_features"], a["terms"], a["rank"], a["bias"])
    if op == "sketched_conv":
        return SKConv2d(ins[0][0], a["out_channels"], a["kernel_size"], a["stride"], a["padding"],
                        a["terms"], a["rank"], a["bias"])
    if op == "batchnorm":
        shape = ins[0]
        cls = {4: nn.BatchNorm3d, 3: nn.BatchNorm2d}.get(len(shape), nn.BatchNorm1d)
        return cls(shape[0], eps=a["eps"], momentum=a["momentum"])
    if op == "layernorm":
        return nn.LayerNorm(ins[0][-1], eps=a["eps"])
    if op == "instancenorm":
        return nn.InstanceNorm2d(ins[0][0], eps=a["eps"], affine=a["affine"])
    if op == "maxpool":
        return nn.MaxPool2d(a["kernel_size"], stride=a["stride"], padding=a["padding"])
    if op == "avgpool":
        return nn.AvgPool2d(a["kernel_size"], stride=a["stride"], padding=a["padding"])
    if op == "dropout":
        return nn.Dropout(a["p"])
    if op == "class_token":
        return ClassToken(n["out"][-1])
    if op == "pos_embed":
        return PosEmbed(n["out"])
    if op == "attention":
        # torchvision's EncoderBlock.self_attention: its parameters are
        # in_proj_weight [3D, D], in_proj_bias, out_proj.weight, out_proj.bias.
        return nn.MultiheadAttention(ins[0][-1], a["heads"], dropout=a.get("dropout", 0.0), batch_first=True)
    if op == "random_attention":
        return RandAttention(ins[0][-1], a["heads"], a["features"], a["causal"], a["kernel"])
    return None


def define_modules():
    """Module classes that need torch imported."""
    global LowRank

    class _LowRank(nn.Module):
        """pipe's lowrank_dense: y = x·Σ_i U_i·V_i + b, computed as
        [x·U_1, …, x·U_T]·[V_1; …; V_T] without forming the dense weight.
        u is [terms, in, rank], v [terms, rank, out], as pipe stores them."""

        def __init__(self, fin, fout, terms, rank, bias):
            super().__init__()
            self.terms, self.rank = terms, rank
            self.u = nn.Parameter(torch.empty(terms, fin, rank))
            self.v = nn.Parameter(torch.empty(terms, rank, fout))
            self.bias = nn.Parameter(torch.empty(fout)) if bias else None

        def forward(self, x):
            # t = [x·U_1, …, x·U_T], [n, terms·rank], one product a term:
            # each reads a slice of u in place, so backward keeps views of
            # the parameter and no copy of it. Under autocast, x and the
            # weights are cast once here rather than once a term.
            dt = autocast_dtype(x.device.type)
            u, v = self.u, self.v
            if dt is not None:
                x, u, v = x.to(dt), u.to(dt), v.to(dt)
            t = torch.cat([x @ u[i] for i in range(self.terms)], dim=1)
            y = t @ v.reshape(self.terms * self.rank, -1)
            if self.bias is not None:
                y = y + self.bias.to(y.dtype)  # as nn.Linear adds it, in y's precision
            return y

    LowRank = _LowRank

    global SKLinear, SKConv2d

    def sign_sketch(*shape, rank):
        """Panther's scaled_sign_sketch: ±1/√rank, fair coins."""
        return torch.sign(torch.rand(*shape) - 0.5) / rank ** 0.5

    class _SKLinear(nn.Module):
        """Panther's SKLinear (stdlib/panther.go): y = 1/(2L)·Σ_i
        (x·S1_i·U1_i + x·U2_i·S2_i) + b with learned S1s [L, in, k], S2s
        [L, k, out] and fixed buffers U1s [L, k, out], U2s [L, in, k],
        Panther's names and layout. pipe hands it the native engine's
        initial tensors; its own initialisation is Panther's."""

        def __init__(self, fin, fout, terms, rank, bias):
            super().__init__()
            self.terms, self.rank = terms, rank
            self.register_buffer("U1s", sign_sketch(terms, rank, fout, rank=rank))
            self.register_buffer("U2s", sign_sketch(terms, fin, rank, rank=rank))
            w = torch.empty(fin, fout).uniform_(-fout ** -0.5, fout ** -0.5)
            self.S1s = nn.Parameter(w @ self.U1s.transpose(1, 2))
            self.S2s = nn.Parameter(self.U2s.transpose(1, 2) @ w)
            self.bias = nn.Parameter(torch.empty(fout).uniform_(-fout ** -0.5, fout ** -0.5)) if bias else None

        def forward(self, x):
            # The products with the fixed U run in fp32 outside autocast,
            # so that backward keeps the buffers themselves and no cast
            # copy of them; those with the learned S run as autocast says.
            lk = self.terms * self.rank
            with torch.autocast(x.device.type, enabled=False):
                xf = x.float()
                t2 = torch.cat([xf @ self.U2s[i] for i in range(self.terms)], dim=1)
            t1 = torch.cat([x @ self.S1s[i] for i in range(self.terms)], dim=1)
            y2 = t2 @ self.S2s.reshape(lk, -1)
            with torch.autocast(x.device.type, enabled=False):
                y1 = t1.float() @ self.U1s.reshape(lk, -1)
            y = (y1.to(y2.dtype) + y2) * (1.0 / (2 * self.terms))
            if self.bias is not None:
                y = y + self.bias.to(y.dtype)
            return y

    class _SKConv2d(nn.Module):
        """Panther's SKConv2d (stdlib/panther.go): t = conv2d(x, S1s) with
        S1s [2L·k, in, kh, kw] learned, then y = 1/(2L)·Uᵀ·t + b with the
        fixed U1s [2L, k, out] read as [2L·k, out]."""

        def __init__(self, fin, fout, kernel, stride, padding, terms, rank, bias):
            super().__init__()
            self.terms, self.stride, self.padding = terms, stride, padding
            mid = 2 * terms * rank
            self.register_buffer("U1s", sign_sketch(2 * terms, rank, fout, rank=rank))
            bound = (kernel * kernel * fout) ** -0.5
            w = torch.empty(fin, kernel, kernel, fout).uniform_(-bound, bound)
            s = (w.reshape(-1, fout) @ self.U1s.reshape(mid, fout).t()).t()
            self.S1s = nn.Parameter(s.reshape(mid, fin, kernel, kernel).contiguous())
            self.bias = nn.Parameter(torch.empty(fout).uniform_(-bound, bound)) if bias else None

        def forward(self, x):
            t = F.conv2d(x, self.S1s, stride=self.stride, padding=self.padding)
            n, mid, h, w = t.shape
            with torch.autocast(x.device.type, enabled=False):  # as SKLinear's U products
                y = self.U1s.reshape(mid, -1).t() @ t.float().reshape(n, mid, h * w)
            y = (y.to(t.dtype) * (1.0 / (2 * self.terms))).reshape(n, -1, h, w)
            if self.bias is not None:
                y = y + self.bias.to(y.dtype).reshape(1, -1, 1, 1)
            return y

    SKLinear, SKConv2d = _SKLinear, _SKConv2d

    global ClassToken, PosEmbed

    class _ClassToken(nn.Module):
        """torchvision's VisionTransformer.class_token, [1, 1, D]: prepended
        to every sample's tokens."""

        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(1, 1, d))

        def forward(self, x):
            return torch.cat([self.weight.expand(x.shape[0], -1, -1), x], dim=1)

    class _PosEmbed(nn.Module):
        """torchvision's Encoder.pos_embedding, [1, T, D], added to the
        tokens."""

        def __init__(self, shape):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(1, *shape).normal_(std=0.02))

        def forward(self, x):
            return x + self.weight

    ClassToken, PosEmbed = _ClassToken, _PosEmbed

    global RandAttention

    class _RandAttention(nn.Module):
        """pipe's random_attention, Panther's RandMultiHeadAttention
        (Performer's FAVOR+, stdlib/randattn.go): Wq, Wk, Wv, W0 and their
        biases under Panther's names, the fixed random features
        projection_matrix [M, d] as a buffer. Written in plain torch ops, so
        autograd differentiates it (Panther's causal kernels have their own
        backward); the stabiliser's max passes its gradient on as autograd's
        max does."""

        def __init__(self, d, heads, m, causal, kernel):
            super().__init__()
            self.h, self.dh, self.m, self.causal, self.relu = heads, d // heads, m, causal, kernel == "relu"
            for w in ("Wq", "Wk", "Wv", "W0"):
                setattr(self, w, nn.Parameter(nn.init.xavier_uniform_(torch.empty(d, d))))
            for b in ("bq", "bk", "bv", "b0"):
                setattr(self, b, nn.Parameter(torch.zeros(d)))
            self.register_buffer("projection_matrix", favor_features(m, self.dh))

        def features(self, z, query):
            w, r = self.projection_matrix, self.m ** -0.5
            if self.relu:
                return F.relu(r * (z @ w.t())) + 1e-5
            z = z * self.dh ** -0.25
            dash = z @ w.t()
            diag = (z * z).sum(-1, keepdim=True) / 2
            mx = dash.max(-1, keepdim=True)[0]
            if not query:
                mx = mx.max(-3, keepdim=True)[0]  # over the tokens of each head
            return r * (torch.exp(dash - diag - mx) + 1e-5)

        def forward(self, x):
            n, t, d = x.shape
            q = F.linear(x, self.Wq, self.bq).view(n, t, self.h, self.dh)
            k = F.linear(x, self.Wk, self.bk).view(n, t, self.h, self.dh)
            v = F.linear(x, self.Wv, self.bv).view(n, t, self.h, self.dh)
            a, b = self.features(q, True), self.features(k, False)  # [n, t, h, m]
            if self.causal:
                s = torch.cumsum(b.unsqueeze(-1) * v.unsqueeze(-2), dim=1)  # [n, t, h, m, dh]
                num = (a.unsqueeze(-1) * s).sum(-2)
                den = (a * torch.cumsum(b, dim=1)).sum(-1)
            else:
                kv = torch.einsum("nthm,nthd->nhmd", b, v)
                num = torch.einsum("nthm,nhmd->nthd", a, kv)
                den = (a * b.sum(1, keepdim=True)).sum(-1)
            o = (num / den.unsqueeze(-1)).reshape(n, t, d)
            return F.linear(o, self.W0, self.b0)

    RandAttention = _RandAttention


def favor_features(m, d):
    """Panther's create_projection_matrix (scaling off), from torch's
    seeded generator: blocks of d orthonormal rows (the transposed Q of a
    Gaussian's QR), the last cut to the rows left, each row times the norm
    of a Gaussian d-vector."""
    blocks = []
    for _ in range((m + d - 1) // d):
        qm, _ = torch.linalg.qr(torch.randn(d, d))
        blocks.append(qm.t())
    w = torch.cat(blocks)[:m]
    return torch.randn(m, d).norm(dim=1, keepdim=True) * w


LowRank = None
SKLinear = None
SKConv2d = None
RandAttention = None
ClassToken = None
PosEmbed = None
Net = None


def autocast_dtype(device_type):
    """The dtype autocast computes in on this device now, None when off."""
    if device_type == "cuda":
        if torch.is_autocast_enabled():
            get = getattr(torch, "get_autocast_gpu_dtype", None)
            return get() if get else torch.float16
        return None
    if torch.is_autocast_cpu_enabled():
        return torch.get_autocast_cpu_dtype()
    return None


def define_net():
    global Net

    class _Net(nn.Module):
        """The graph of a spec, run node by node in its topological order.

        forward returns (logits, out): out is the model's output and logits
        what the loss reads, the values before a final softmax
        (cross_entropy) or sigmoid (bce), as pipe's losses do.
        """

        def __init__(self, spec):
            super().__init__()
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
                      "instancenorm",
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
                s = (n.get("args") or {}).get("scale", 1)
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

    Net = _Net


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


def setup():
    """Imports torch and defines the modules; other scripts (the
    benchmark's plain PyTorch loop) call it before they use Net."""
    if Net is None:
        import_torch()
        define_modules()
        define_net()


def make_optimizer(o, params, fused=False):
    """The optimizer of a spec's "optimizer" with PyTorch's semantics, and
    what was made: (optimizer, description, fused)."""
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


# ---------------------------------------------------------------------------
# Losses: pipe's definitions (exec.Loss), masks included.

def ce_targets(y, n, out_shape):
    """Class indices when there is one value per output position."""
    positions = 1
    for d in out_shape[1:]:
        positions *= d
    return y.numel() == n * positions and out_shape[0] > 1


def compute_loss(kind, logits, out, y, mask, n, out_shape, ends_sigmoid=False):
    """The mean loss over the batch's valid positions, in fp32."""
    logits = logits.float()
    if kind == "cross_entropy":
        k = out_shape[0]
        if ce_targets(y, n, out_shape):
            t = y.reshape([n] + list(out_shape[1:]))
            w = None if mask is None else mask.reshape(t.shape)
            idx = t.long()
            if w is not None:
                idx = torch.where(w > 0, idx, torch.zeros_like(idx))
            per = F.cross_entropy(logits, idx, reduction="none")
        else:
            t = y.reshape([n] + list(out_shape))
            per = -(t * F.log_softmax(logits, dim=1)).sum(1)
            w = None
            if mask is not None:
                w = mask.reshape([n] + list(out_shape)).select(1, 0)
        if w is None:
            return per.mean()
        den = w.sum()
        return torch.where(den > 0, (per * w).sum() / den.clamp_min(1e-30), per.sum() * 0)
    t = y.reshape([n] + list(out_shape))
    w = None if mask is None else mask.reshape(t.shape)
    if kind == "dice":
        # A model that ends in sigmoid hands dice its probabilities; any
        # other hands it logits, which dice passes through a sigmoid.
        p = out.float() if ends_sigmoid else torch.sigmoid(logits)
        dims = [0] + list(range(2, p.dim()))
        if w is None:
            s0, s1, s2 = (p * t).sum(dims), p.sum(dims), t.sum(dims)
        else:
            s0, s1, s2 = (w * p * t).sum(dims), (w * p).sum(dims), (w * t).sum(dims)
        return 1 - ((2 * s0 + 1) / (s1 + s2 + 1)).mean()
    if kind == "bce":
        per = F.binary_cross_entropy_with_logits(logits, t, reduction="none")
    elif kind == "mse":
        per = (logits - t) ** 2
    elif kind == "mae":
        per = (logits - t).abs()
    else:
        raise Failure("unsupported", f"loss {kind} is not built here")
    if w is None:
        return per.mean()
    den = w.sum()
    return torch.where(den > 0, (per * w).sum() / den.clamp_min(1e-30), per.sum() * 0)


def gan_loss(kind, role, z):
    """exec's advLoss: a gan's adversarial loss of role (real, fake or gen)
    on a discriminator's logits z, the mean over every value."""
    z = z.float()
    if kind == "lsgan":
        return ((z - (0.0 if role == "fake" else 1.0)) ** 2).mean()
    if kind == "hinge":
        if role == "real":
            return F.relu(1 - z).mean()
        if role == "fake":
            return F.relu(1 + z).mean()
        return -z.mean()
    return F.softplus(z if role == "fake" else -z).mean()


# ---------------------------------------------------------------------------
# Shared memory

class Region:
    """A shared-memory file pipe created, mapped here."""

    def __init__(self, path, size):
        fd = os.open(path, os.O_RDWR)
        try:
            self.mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.size = size

    def floats(self, off, count):
        """count float32 values from byte offset off, without a copy."""
        if count == 0:
            return torch.empty(0)
        return torch.frombuffer(self.mm, dtype=torch.float32, count=count, offset=off)

    def close(self):
        try:
            self.mm.close()
        except BufferError:
            pass  # a tensor still views it; the process is ending


# ---------------------------------------------------------------------------
# The worker

def storage_key(t):
    try:
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    except AttributeError:
        s = t.storage()
        return s.data_ptr(), s.nbytes() if hasattr(s, "nbytes") else s.size() * t.element_size()


class Worker:
    def __init__(self, out):
        self.out = out
        self.regions = {}
        self.model = None
        self.step_no = 0
        self.micro = 0
        self.seed = 0
        self.pending = []  # lagged mode: [(step, [(loss tensor, n)])]
        self.current = []  # this step's micro-batch losses
        self.applied = {}
        self.gan = None  # gan mode: the discriminator and its settings (cmd_build_gan)

    # -- protocol --------------------------------------------------------
    def reply(self, obj):
        self.out.write(json.dumps(finite_json(obj), allow_nan=False) + "\n")
        self.out.flush()

    def serve(self, stdin):
        for line in stdin:
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError as e:
                self.reply({"ok": False, "kind": "error", "error": f"unreadable command: {e}"})
                continue
            cmd = msg.get("cmd")
            if cmd == "quit":
                self.reply({"ok": True})
                break
            self.phase = None
            if getattr(self, "net", None) is not None:
                self.net.current = None
            try:
                fn = getattr(self, "cmd_" + cmd, None)
                if fn is None:
                    raise Failure("error", f"unknown command {cmd!r}")
                res = fn(msg.get("args") or {}) or {}
                res["ok"] = True
                self.reply(res)
            except Failure as e:
                self.reply({"ok": False, "kind": e.kind, "error": str(e), **e.extra})
            except Exception as e:  # noqa: BLE001 - every failure goes back to pipe
                if is_oom(e):
                    self.reply(self.oom_reply(e))
                else:
                    self.reply({"ok": False, "kind": "error", "error": f"{type(e).__name__}: {e}",
                                "trace": traceback.format_exc(limit=8)})
        for r in self.regions.values():
            r.close()

    # -- commands --------------------------------------------------------
    def cmd_hello(self, msg):
        return hello()

    def cmd_time_plain(self, msg):
        """The benchmark's reference: a plain PyTorch training loop on this
        worker's own network, optimizer and a copy of the batch in msg,
        in this process, timed step by step (zero_grad, forward, loss,
        backward, step). The engine's own steps run in the same process,
        threads and memory, so the difference is the engine's overhead."""
        n = msg["n"]
        x, y, mask = self.batch(msg, True)
        x = x.clone()
        y = None if y is None else y.clone()
        model, opt = self.forward_model(), self.opt
        for g in opt.param_groups:
            g["lr"] = msg["lr"]

        def step():
            opt.zero_grad(set_to_none=True)
            with self.autocast():
                logits, out = model(x)
            loss = compute_loss(self.loss_kind, logits, out, y, mask, n, self.out_shape, self.ends_sigmoid)
            loss.backward()
            opt.step()

        for _ in range(msg.get("warmup", 1)):
            step()
        steps = msg["steps"]
        if self.cuda:
            # A plain loop does not wait for the GPU between steps: the
            # steps are timed together, between two synchronisations.
            torch.cuda.synchronize(self.device)
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            torch.cuda.synchronize(self.device)
            each = (time.perf_counter() - t0) * 1e3 / max(steps, 1)
            return {"ms": [each] * steps}
        ms = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            ms.append((time.perf_counter() - t0) * 1e3)
        return {"ms": ms}

    def cmd_map(self, msg):
        old = self.regions.pop(msg["region"], None)
        if old is not None:
            old.close()
        self.regions[msg["region"]] = Region(msg["path"], msg["size"])

    def cmd_build(self, msg):
        spec = msg["spec"]
        if spec.get("version") != SPEC_VERSION:
            raise Failure("error", f"spec version {spec.get('version')}; this worker reads {SPEC_VERSION}")
        self.spec = spec
        cfg = spec["engine"]
        self.cfg = cfg
        self.seed = int(spec.get("seed", 0))
        self.loss_kind = spec["loss"]
        self.out_shape = spec["out_shape"]
        self.input_shape = spec["input"]
        self.lagged = cfg.get("loss_readback") == "lagged"
        threads = int(spec.get("threads") or 0)
        if threads > 0:
            torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
        dev = cfg.get("device", "cpu")
        self.dist = cfg.get("distributed")
        if self.dist:
            dev = self.init_distributed(dev)
        self.device = torch.device(dev)
        self.cuda = self.device.type == "cuda"
        if self.cuda:
            torch.cuda.set_device(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        self.apply_flags()
        torch.manual_seed(self.seed)
        self.ends_sigmoid = spec["nodes"][spec["output"]]["op"] == "sigmoid"
        self.dropout = any(n["op"] == "dropout" and (n.get("args") or {}).get("p", 0) > 0 for n in spec["nodes"])
        net = Net(spec)
        self.check_params(net)
        net = net.to(self.device)
        if self.cfg.get("channels_last") and self.cuda:
            net = net.to(memory_format=torch.channels_last)
            net.channels_last = True
            self.applied["channels_last"] = "on"
        self.net = net
        self.names = self.state_names(net)
        self.model = net
        if self.dist:
            from torch.nn.parallel import DistributedDataParallel as DDP
            kw = {"bucket_cap_mb": max(cfg["distributed"].get("bucket_mb", 25), 1), "broadcast_buffers": True,
                  "gradient_as_bucket_view": True}
            if self.cuda:
                kw["device_ids"] = [self.device.index]
            self.model = DDP(net, **kw)
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.get("autocast") or "")
        self.scaler = None
        if cfg.get("grad_scaler"):
            if not self.cuda:
                raise Failure("unsupported", "fp16 with loss scaling needs a CUDA device; plan bf16 or fp32 for the CPU")
            self.scaler = torch.cuda.amp.GradScaler()
        self.compiled = None
        self.applied["compile"] = "eager"
        if cfg.get("compile"):
            self.try_compile()
        self.opt = self.make_optimizer(spec["optimizer"])
        self.copy_stream = torch.cuda.Stream(self.device) if self.cuda and cfg.get("pinned") else None
        self.staged = {}
        self.events = {}
        self.net.train()
        params = sum(p.numel() for p in net.parameters())
        return {"params": params, "applied": self.applied, "device": str(self.device),
                "torch": torch.__version__}

    def init_distributed(self, dev):
        import datetime
        import torch.distributed as dist
        d = self.dist
        backend = d["backend"]
        timeout = datetime.timedelta(seconds=d.get("timeout_s", 120))
        dist.init_process_group(backend=backend, init_method=f"tcp://{d['master_addr']}:{d['master_port']}",
                                rank=d["rank"], world_size=d["world_size"], timeout=timeout)
        self.rank = d["rank"]
        self.world = d["world_size"]
        self.applied["process_group"] = f"{backend}, rank {d['rank']} of {d['world_size']}"
        return dev

    def apply_flags(self):
        cfg = self.cfg
        tf32 = bool(cfg.get("tf32"))
        if self.cuda:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            self.applied["tf32"] = "on" if tf32 else "off"
            bench = bool(cfg.get("cudnn_benchmark"))
            torch.backends.cudnn.benchmark = bench
            self.applied["cudnn_benchmark"] = "on" if bench else "off"
            cap = int(cfg.get("cudnn_workspace_mib") or 0)
            if cap > 0:
                # Read by cuDNN's convolutions when they pick an
                # algorithm, so it is set before the first one runs.
                os.environ["CUDNN_CONV_WSCAP_DBG"] = str(cap)
                self.applied["cudnn_workspace"] = f"at most {cap} MiB"
        if cfg.get("autocast"):
            self.applied["autocast"] = cfg["autocast"]

    def try_compile(self):
        if not hasattr(torch, "compile") or version_tuple(torch.__version__) < (2, 0, 0):
            self.applied["compile"] = f"eager (torch {torch.__version__} has no torch.compile)"
            return
        if not self.cuda:
            self.applied["compile"] = "eager (torch.compile is used on CUDA devices only)"
            return
        try:
            self.compiled = torch.compile(self.model)
            self.applied["compile"] = "torch.compile"
        except Exception as e:  # noqa: BLE001
            self.compiled = None
            self.applied["compile"] = f"eager (torch.compile failed: {type(e).__name__}: {e})"

    def check_params(self, net):
        for n in self.spec["nodes"]:
            key = module_key(n["name"])
            got = sum(p.numel() for p in net.layers[key].parameters()) if key in net.layers else 0
            if got != n["params"]:
                raise Failure("unsupported", f"node {n['name']} ({n['op']}): torch has {got} parameters, pipe {n['params']}")

    def make_optimizer(self, o):
        opt, self.applied["optimizer"], self.fused = make_optimizer(
            o, list(self.net.parameters()), bool(self.cfg.get("fused_optimizer")) and self.cuda)
        return opt

    # -- state -------------------------------------------------------------
    def state_names(self, net):
        return state_names(self.spec, net)

    def opt_buffers(self):
        kind = self.spec["optimizer"]["kind"]
        if kind in ("adam", "adamw"):
            return ["exp_avg", "exp_avg_sq"]
        if kind == "sgd" and self.spec["optimizer"]["momentum"] > 0:
            return ["momentum_buffer"]
        return []

    def param_of(self, name):
        t = self.names.get(name)
        return t if isinstance(t, nn.Parameter) else None

    def bns(self):
        for n in self.spec["nodes"]:
            if n["op"] == "batchnorm":
                yield n["name"], self.net.layers[module_key(n["name"])]

    def cmd_set_state(self, msg):
        if self.gan is not None:
            return self.gan_set_state(msg)
        self.set_state(msg["layout"], msg["counters"])

    def set_state(self, layout, counters):
        region = self.regions["state"]
        step = int(counters.get("optimizer.step", 0))
        bufs = self.opt_buffers()
        with torch.no_grad():
            for ent in layout:
                name, off, count, shape = ent["name"], ent["offset"], ent["count"], ent["shape"]
                src = region.floats(off, count).reshape(shape)
                if name.startswith("optimizer."):
                    pname, _, buf = name[len("optimizer."):].rpartition(".")
                    p = self.param_of(pname)
                    if p is None or buf not in bufs:
                        raise Failure("error", f"state: unknown tensor {name}")
                    if step == 0:
                        continue  # a fresh optimizer: torch creates its state at the first step
                    st = self.opt.state[p]
                    st[buf] = src.to(p.device, dtype=torch.float32).clone().contiguous(memory_format=torch.preserve_format)
                    if buf != "momentum_buffer":
                        st["step"] = self.step_tensor(step, p)
                    continue
                t = self.names.get(name)
                if t is None:
                    raise Failure("error", f"state: unknown tensor {name}")
                if list(t.shape) != list(shape):
                    raise Failure("error", f"state: {name} has shape {shape}; the model's is {list(t.shape)}")
                t.copy_(src.to(t.device))
            if step == 0:
                self.opt.state.clear()
            for name, m in self.bns():
                m.num_batches_tracked.fill_(int(counters.get(name + ".num_batches_tracked", 0)))
        self.step_no = step
        self.micro = int(counters.get("exec.micro_step", 0))
        if "exec.seed" in counters:
            self.seed = int(counters["exec.seed"])
        self.pending = []
        self.current = []

    def step_tensor(self, step, p):
        if self.fused:
            return torch.tensor(float(step), dtype=torch.float32, device=p.device)
        return torch.tensor(float(step))

    def cmd_layout(self, msg):
        """The state's tensors, names and shapes, in pipe's order
        (parameters, buffers, then the optimizer's buffers): the layout of
        a model whose weights are the worker's own initialisation."""
        params, buffers = [], []
        for name, t in self.names.items():
            (params if isinstance(t, nn.Parameter) else buffers).append({"name": name, "shape": list(t.shape)})
        out = params + buffers
        bufs = self.opt_buffers()
        for p in params:
            out += [{"name": f"optimizer.{p['name']}.{buf}", "shape": p["shape"]} for buf in bufs]
        return {"layout": out}

    def cmd_get_state(self, msg):
        self.sync_device()
        if self.gan is not None:
            return self.gan_get_state(msg)
        return self.get_state(msg["layout"])

    def get_state(self, layout):
        region = self.regions["state"]
        bufs = self.opt_buffers()
        with torch.no_grad():
            for ent in layout:
                name, off, count = ent["name"], ent["offset"], ent["count"]
                dst = region.floats(off, count)
                if name.startswith("optimizer."):
                    pname, _, buf = name[len("optimizer."):].rpartition(".")
                    p = self.param_of(pname)
                    if p is None or buf not in bufs:
                        raise Failure("error", f"state: unknown tensor {name}")
                    v = self.opt.state.get(p, {}).get(buf)
                    if v is None:
                        dst.zero_()
                    else:
                        dst.copy_(v.detach().float().contiguous().reshape(-1).cpu())
                    continue
                t = self.names.get(name)
                if t is None:
                    raise Failure("error", f"state: unknown tensor {name}")
                dst.copy_(t.detach().float().contiguous().reshape(-1).cpu())
        counters = {"optimizer.step": self.step_no, "exec.micro_step": self.micro, "exec.seed": self.seed}
        for name, m in self.bns():
            counters[name + ".num_batches_tracked"] = int(m.num_batches_tracked.item())
        return {"counters": counters}

    # -- batches -----------------------------------------------------------
    def batch(self, msg, train):
        """The batch's tensors on the device. The shared memory may be
        overwritten as soon as this returns (the reply says so), so on a
        CUDA device the values go through a pinned buffer and a copy
        stream, which lets the copy of the next batch run while this
        step's kernels do."""
        region = self.regions["in"]
        n = msg["n"]
        parts = []
        for key in ("x", "y", "mask"):
            ref = msg.get(key)
            parts.append(None if ref is None else region.floats(ref[0], ref[1]))
        if not self.cuda:
            # The CPU computes on the shared memory itself: pipe writes the
            # next batch into another slot, and reuses this one only after
            # this command's reply, when nothing here reads it any more.
            pass
        elif self.copy_stream is not None:
            parts = self.to_device_pinned(parts, train)
        else:
            parts = [None if p is None else p.to(self.device) for p in parts]
        x, y, mask = parts
        x = x.reshape([n] + list(self.input_shape))
        if self.net.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        return x, y, mask

    def to_device_pinned(self, parts, train):
        slot = "train" if train else "eval"
        out = []
        cur = torch.cuda.current_stream(self.device)
        turn = self.flip(slot)
        for i, p in enumerate(parts):
            if p is None:
                out.append(None)
                continue
            key = (slot, i, turn)
            ev = self.events.get(key)
            if ev is not None:
                ev.synchronize()  # the copy that last used this buffer is done
            buf = self.staged.get(key)
            if buf is None or buf.numel() < p.numel():
                buf = torch.empty(max(p.numel(), 1), dtype=torch.float32, pin_memory=True)
                self.staged[key] = buf
            host = buf[:p.numel()]
            host.copy_(p)
            with torch.cuda.stream(self.copy_stream):
                d = host.to(self.device, non_blocking=True)
                e = torch.cuda.Event()
                e.record(self.copy_stream)
            self.events[key] = e
            cur.wait_event(e)
            d.record_stream(cur)
            out.append(d)
        return out

    def flip(self, slot):
        # Two pinned buffers a slot, used in turn.
        k = "_flip_" + slot
        v = getattr(self, k, 0)
        setattr(self, k, 1 - v)
        return v

    def autocast(self):
        if self.autocast_dtype is None:
            return NullCtx()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def seed_dropout(self):
        """Dropout's masks are keyed by (seed, micro-batch, rank), so a
        resumed run draws the masks the uninterrupted run would have."""
        rank = self.dist["rank"] if self.dist else 0
        s = (self.seed * 1000003 + self.micro * 8191 + rank * 131071 + 1) % (2 ** 63 - 1)
        torch.manual_seed(s)

    def forward_model(self):
        return self.compiled if self.compiled is not None else self.model

    # -- training ------------------------------------------------------------
    def cmd_train(self, msg):
        if self.gan is not None:
            return self.gan_train(msg)
        if not msg.get("profile"):
            return self.train_micro(msg, None)
        # Profiled: the nodes timed, eagerly (a compiled graph has no
        # nodes to time).
        timer = Timer(self.cuda, self.device)
        self.net.timer = timer
        try:
            res = self.train_micro(msg, timer)
        finally:
            self.net.timer = None
        res["spans"] = timer.spans
        return res

    def train_micro(self, msg, timer):
        n = msg["n"]
        x, y, mask = self.batch(msg, True)
        if msg.get("zero"):
            self.opt.zero_grad(set_to_none=True)
            self.current = []
        sync = msg.get("sync", True)
        if not self.lagged:
            snap = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone())
                    for _, m in self.bns()]
        if self.dropout:
            self.seed_dropout()
        model = self.forward_model() if timer is None else self.model
        # Accumulating micro-batches skip DDP's all-reduce but the last.
        ctx = self.model.no_sync() if (self.dist and not sync) else NullCtx()
        self.phase = "forward"
        with ctx:
            with self.autocast():
                logits, out = model(x)
            if timer is not None:
                tl = timer.now()
            loss = compute_loss(self.loss_kind, logits, out, y, mask, n, self.out_shape, self.ends_sigmoid)
            if timer is not None:
                timer.add(-1, 3, tl, timer.now())
            if not self.lagged:
                v = loss.item()
                if not math.isfinite(v):
                    for (rm, rv, nt), (_, m) in zip(snap, self.bns()):
                        m.running_mean.copy_(rm)
                        m.running_var.copy_(rv)
                        m.num_batches_tracked.copy_(nt)
                    raise self.nonfinite(v, x)
            self.phase = "backward"
            scaled = loss * msg["scale"]
            if timer is not None:
                tb = timer.now()
            if self.scaler is not None:
                self.scaler.scale(scaled).backward()
            else:
                scaled.backward()
            if timer is not None:
                timer.backward(tb, timer.now())
        self.phase = None
        self.micro += 1
        if self.lagged:
            self.current.append((loss.detach(), n))
            res = {}
        else:
            res = {"loss": v}
        step = msg.get("step")
        if step is not None:
            # The step's last micro-batch carries the optimizer step: one
            # round trip a step.
            res.update(self.cmd_step(step))
        return res

    def nonfinite(self, v, x):
        """A non-finite loss: which node's output first went bad."""
        info = {"step": self.step_no, "micro_step": self.micro, "loss": v}
        if not bool(torch.isfinite(x).all()):
            info["input"] = True
            return Failure("nonfinite", "the input batch holds NaN or Inf", **info)
        for name, t in self.names.items():
            if not bool(torch.isfinite(t).all()):
                info["param"] = name
                return Failure("nonfinite", f"{name} is not finite", **info)
        bad = self.first_nonfinite(x)
        if bad is not None:
            info["node"], info["op"] = bad
        return Failure("nonfinite", "non-finite loss", **info)

    def first_nonfinite(self, x):
        net = self.net
        was = net.training
        found = [None]
        nodes = net.nodes

        def check(i, t):
            if found[0] is None and t is not None and t.is_floating_point() and not bool(torch.isfinite(t).all()):
                found[0] = (nodes[i]["name"], nodes[i]["op"])

        saved = {}
        for _, m in self.bns():
            saved[m] = (m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone())
        try:
            with torch.no_grad(), self.autocast():
                outs = [None] * len(nodes)
                for i, n in enumerate(nodes):
                    xs = [outs[j] for j in n["inputs"]] if n["op"] != "input" else [x]
                    outs[i] = net.run_node(n, xs)
                    check(i, outs[i])
                    if found[0] is not None:
                        break
        finally:
            for m, (rm, rv, nt) in saved.items():
                m.running_mean.copy_(rm)
                m.running_var.copy_(rv)
                m.num_batches_tracked.copy_(nt)
            net.train(was)
        return found[0]

    def cmd_step(self, msg):
        if self.gan is not None and not self.gan_step(msg):
            return self.skip_step()
        lr = msg["lr"]
        for g in self.opt.param_groups:
            g["lr"] = lr
        res = {}
        clip = msg.get("clip") or 0
        self.phase = "optimizer"
        if self.scaler is not None and clip > 0:
            self.scaler.unscale_(self.opt)
        if clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.net.parameters(), clip)
            if not self.lagged:
                res["norm"] = norm.item()
        if not self.lagged:
            bad = self.first_bad_grad()
            if bad is not None:
                self.phase = None
                raise Failure("nonfinite", f"the gradient of {bad} is not finite", step=self.step_no,
                              micro_step=self.micro, param="the gradient of " + bad, loss=0.0)
        if self.scaler is not None:
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            self.opt.step()
        self.phase = None
        self.step_no += 1
        if self.lagged:
            # The losses of the step before this one: its kernels finished
            # while this step's were queued, so reading them costs no wait.
            done = self.pending
            self.pending = [(self.step_no, self.current)]
            self.current = []
            res["done"] = self.read_losses(done)
        return res

    def read_losses(self, steps):
        out = []
        for step, losses in steps:
            vals = [t.item() for t, _ in losses]
            out.append({"step": step, "losses": vals, "n": [n for _, n in losses]})
        return out

    def cmd_flush(self, msg):
        done = self.pending + ([(self.step_no + 1, self.current)] if self.current else [])
        self.pending = []
        self.current = []
        self.sync_device()
        return {"done": self.read_losses(done)}

    def first_bad_grad(self):
        grads = [p.grad for p in self.net.parameters() if p.grad is not None]
        if not grads:
            return None
        # A sum is finite only when every term is: one reduction a tensor
        # and one read back, where an isfinite per element would allocate.
        total = float(torch.stack([g.sum(dtype=torch.float32) for g in grads]).sum())
        if math.isfinite(total):
            return None
        for name, t in self.names.items():
            if isinstance(t, nn.Parameter) and t.grad is not None and not bool(torch.isfinite(t.grad).all()):
                return name
        return None  # finite terms whose sum overflowed

    def cmd_clip(self, msg):
        if self.scaler is not None:
            self.scaler.unscale_(self.opt)
        norm = torch.nn.utils.clip_grad_norm_(self.net.parameters(), msg["max"])
        return {"norm": norm.item()}

    def cmd_zero(self, msg):
        self.opt.zero_grad(set_to_none=True)
        if self.gan is not None:
            self.gan["opt"].zero_grad(set_to_none=True)
        self.current = []

    def cmd_eval(self, msg):
        n = msg["n"]
        x, y, mask = self.batch(msg, False)
        net = self.net
        net.eval()
        self.phase = "evaluation"
        timer = Timer(self.cuda, self.device) if msg.get("profile") else None
        net.timer = timer
        try:
            with torch.no_grad():
                with self.autocast():
                    logits, out = net(x)
                loss = 0.0
                if y is not None:
                    if timer is not None:
                        tl = timer.now()
                    loss = compute_loss(self.loss_kind, logits, out, y, mask, n, self.out_shape, self.ends_sigmoid).item()
                    if timer is not None:
                        timer.add(-1, 3, tl, timer.now())
                ref = msg.get("out")
                if ref is not None:
                    dst = self.regions["out"].floats(ref[0], ref[1])
                    dst.copy_(out.float().contiguous().reshape(-1).cpu())
        finally:
            net.train()
            net.timer = None
        self.phase = None
        if timer is not None:
            return {"loss": loss, "spans": timer.spans}
        return {"loss": loss}

    def sync_device(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    # -- memory ----------------------------------------------------------------
    # -- gan mode ------------------------------------------------------------
    # The discriminator D lives beside the generator (the model built by
    # cmd_build) with its own optimizer; swap() exchanges the attributes
    # that say which model the state commands and the optimizer step work
    # on. Each train command is one micro-batch as exec's ganModel trains
    # it: G forward; D's gradient from half its loss on the targets and
    # half on G's output (detached); then D once more on G's output for
    # G's term, D's parameters frozen, and on a step where G trains (every
    # d_steps-th) G's gradient from adversarial weight x that term plus l1
    # x the L1 distance. The step steps D, then G when it trained.
    GAN_SWAP = ("net", "model", "names", "opt", "spec", "step_no", "micro", "seed", "fused", "compiled",
                "dropout", "loss_kind", "out_shape", "input_shape", "ends_sigmoid")

    def swap(self):
        g = self.gan
        for k in self.GAN_SWAP:
            v = getattr(self, k)
            setattr(self, k, g[k])
            g[k] = v

    def cmd_build_gan(self, msg):
        if self.dist:
            raise Failure("unsupported", "gan mode trains on one device: plan it without data parallelism")
        if self.scaler is not None:
            raise Failure("unsupported", "gan mode with fp16 loss scaling is not built; plan bf16 or fp32")
        spec, st = msg["spec"], msg["gan"]
        net = Net(spec).to(self.device)
        net.train()
        g = {"net": net, "model": net, "names": state_names(spec, net), "opt": None, "spec": spec, "step_no": 0,
             "micro": 0, "seed": int(spec.get("seed", 0)), "fused": False, "compiled": None,
             "dropout": any(n["op"] == "dropout" and (n.get("args") or {}).get("p", 0) > 0 for n in spec["nodes"]),
             "loss_kind": spec["loss"], "out_shape": spec["out_shape"], "input_shape": spec["input"],
             "ends_sigmoid": False, "conditional": bool(st["conditional"]), "adversarial": st["adversarial"],
             "adv_weight": float(st["adversarial_weight"]), "l1": float(st["l1"]),
             "d_steps": max(int(st["d_steps"]), 1), "ratio": float(st["lr_ratio"]), "steps": 0, "trained": False}
        self.gan = g
        applied = self.applied.get("optimizer")
        self.swap()
        try:
            self.check_params(net)
            self.opt = self.make_optimizer(spec["optimizer"])
        finally:
            self.swap()
            self.applied["optimizer"] = applied
        return {"params": sum(p.numel() for p in net.parameters())}

    def gan_train(self, msg):
        g = self.gan
        n, scale = msg["n"], msg["scale"]
        x, y, mask = self.batch(msg, True)
        if msg.get("zero"):
            self.opt.zero_grad(set_to_none=True)
            g["opt"].zero_grad(set_to_none=True)
            self.current = []
        trains = g["steps"] % g["d_steps"] == 0
        snap = None
        if not trains:  # G's running statistics move only when it trains, as on the native engine
            snap = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone()) for _, m in self.bns()]
        if self.dropout:
            self.seed_dropout()
        self.phase = "forward"
        with self.autocast():
            logits, out = self.forward_model()(x)
        if snap is not None:
            with torch.no_grad():
                for (rm, rv, nt), (_, m) in zip(snap, self.bns()):
                    m.running_mean.copy_(rm)
                    m.running_var.copy_(rv)
                    m.num_batches_tracked.copy_(nt)
        d, kind = g["net"], g["adversarial"]
        real = y.reshape([n] + list(self.out_shape))

        def disc(img):
            if g["conditional"]:
                img = torch.cat([x.to(img.dtype), img], 1)
            with self.autocast():
                return d(img)[0]

        self.phase = "backward"
        lr_ = gan_loss(kind, "real", disc(real))
        lf = gan_loss(kind, "fake", disc(out.detach()))
        ((0.5 * lr_ + 0.5 * lf) * scale).backward()
        for p in d.parameters():
            p.requires_grad_(False)
        try:
            with NullCtx() if trains else torch.no_grad():
                adv = gan_loss(kind, "gen", disc(out))
                l1 = compute_loss("mae", logits, out, y, mask, n, self.out_shape)
                total = g["adv_weight"] * adv + g["l1"] * l1
                if trains:
                    (total * scale).backward()
        finally:
            for p in d.parameters():
                p.requires_grad_(True)
        self.phase = None
        g["micro"] += 3
        if trains:
            self.micro += 1
            g["trained"] = True
        if self.lagged:
            self.current.append((total.detach(), n))
            res = {}
        else:
            v = total.item()
            if not math.isfinite(v):
                raise self.nonfinite(v, x)
            res = {"loss": v, "gan": [0.5 * (lr_.item() + lf.item()), adv.item(), l1.item()]}
        step = msg.get("step")
        if step is not None:
            res.update(self.cmd_step(step))
        return res

    def gan_step(self, msg):
        """D's optimizer step; whether G steps too."""
        g = self.gan
        for pg in g["opt"].param_groups:
            pg["lr"] = msg["lr"] * g["ratio"]
        self.phase = "optimizer"
        g["opt"].step()
        self.phase = None
        g["step_no"] += 1
        g["steps"] += 1
        trained, g["trained"] = g["trained"], False
        return trained

    def skip_step(self):
        """A step in which G did not train: the losses move on as cmd_step's do."""
        if not self.lagged:
            return {}
        done = self.pending
        self.pending = [(self.step_no + 1, self.current)]
        self.current = []
        return {"done": self.read_losses(done)}

    def split_gan(self, layout, counters):
        p = GAN_PREFIX
        dl = [dict(e, name=e["name"][len(p):]) for e in layout if e["name"].startswith(p)]
        gl = [e for e in layout if not e["name"].startswith(p)]
        dc = {k[len(p):]: v for k, v in counters.items() if k.startswith(p)}
        return gl, dl, dc

    def gan_set_state(self, msg):
        gl, dl, dc = self.split_gan(msg["layout"], msg.get("counters") or {})
        self.swap()
        try:
            self.set_state(dl, dc)
        finally:
            self.swap()
        self.set_state(gl, msg["counters"])
        self.gan["steps"] = int(msg["counters"].get("gan.step", 0))
        self.gan["trained"] = False

    def gan_get_state(self, msg):
        gl, dl, _ = self.split_gan(msg["layout"], {})
        self.swap()
        try:
            dc = self.get_state(dl)["counters"]
        finally:
            self.swap()
        c = self.get_state(gl)["counters"]
        for k, v in dc.items():
            c[GAN_PREFIX + k] = v
        c["gan.step"] = self.gan["steps"]
        return {"counters": c}

    def cmd_memory(self, msg):
        res = {"max_rss_bytes": max_rss()}
        if self.model is not None and self.cuda:
            d = self.device
            torch.cuda.synchronize(d)
            free, total = torch.cuda.mem_get_info(d)
            res.update({
                "device": str(d),
                "max_allocated_bytes": torch.cuda.max_memory_allocated(d),
                "max_reserved_bytes": torch.cuda.max_memory_reserved(d),
                "allocated_bytes": torch.cuda.memory_allocated(d),
                "reserved_bytes": torch.cuda.memory_reserved(d),
                "device_used_bytes": total - free,
                "device_total_bytes": total,
            })
        if msg.get("reset") and self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        return res

    def oom_reply(self, e):
        mem = {}
        try:
            mem = self.cmd_memory({})
        except Exception:  # noqa: BLE001
            pass
        node = getattr(self.net, "current", None) if getattr(self, "net", None) is not None else None
        phase = getattr(self, "phase", None) or "unknown"
        if phase not in ("forward", "evaluation"):
            node = None
        try:
            if self.cuda:
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass
        return {"ok": False, "kind": "oom", "error": str(e).split("\n")[0][:400], "node": node or "",
                "phase": phase, "memory": mem}

    def cmd_saved(self, msg):
        """One training forward pass and its loss under saved-tensor hooks:
        the bytes autograd keeps for the backward pass, each storage once,
        split into activations, parameters, buffers and autocast's copies
        of the parameters.

        The activations are also told per node: a saved storage that is a
        node's output (or a view of one) counts for the node that made it,
        the first to return it; any other (a cast copy, a mask, pooling
        indices, a norm's statistics, attention's inner tensors) for the
        node running when it was saved, and what the loss saves for the
        loss. The input batch is copied first, so that it is a storage of
        its own size rather than a view of the shared memory."""
        n = msg["n"]
        x, y, mask = self.batch(msg, True)
        x = x.clone()
        y = None if y is None else y.clone()
        mask = None if mask is None else mask.clone()
        net = self.net
        params = {storage_key(p)[0] for p in net.parameters()}
        buffers = {storage_key(b)[0] for b in net.buffers()}
        seen = {}
        owner = {}
        where = ["forward"]

        def pack(t):
            key, nbytes = storage_key(t)
            if key not in seen:
                if key in params:
                    kind = "parameters"
                elif key in buffers:
                    kind = "buffers"  # a batchnorm's running statistics
                elif is_param_cast(t):
                    kind = "parameter_casts"
                else:
                    kind = "activations"
                at = net.current_id if where[0] == "forward" else where[0]
                seen[key] = (kind, nbytes, str(t.dtype).replace("torch.", ""), at)
            return t

        alive = []

        def record(i, t):
            # Every output is held until the end, so that no storage's
            # address is reused by a later one.
            if torch.is_tensor(t):
                alive.append(t)
                owner.setdefault(storage_key(t)[0], i)

        snap = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone()) for _, m in self.bns()]
        segments = net.segments
        net.segments = {} if msg.get("no_checkpoint") else segments
        net.record = record
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                with self.autocast():
                    logits, out = net(x)
                where[0] = "loss"
                loss = compute_loss(self.loss_kind, logits, out, y, mask, n, self.out_shape, self.ends_sigmoid)
        finally:
            net.record = None
            net.segments = segments
            for (rm, rv, nt), (_, m) in zip(snap, self.bns()):
                m.running_mean.copy_(rm)
                m.running_var.copy_(rv)
                m.num_batches_tracked.copy_(nt)
        del loss, alive
        totals = {}
        by_dtype = {}
        nodes = {}
        for key, (kind, nbytes, dt, at) in seen.items():
            totals[kind] = totals.get(kind, 0) + nbytes
            if kind != "activations":
                continue
            by_dtype[dt] = by_dtype.get(dt, 0) + nbytes
            at = owner.get(key, at)
            name = "loss" if at == "loss" else str(at)
            e = nodes.setdefault(name, {"bytes": 0, "dtypes": {}})
            e["bytes"] += nbytes
            e["dtypes"][dt] = e["dtypes"].get(dt, 0) + nbytes
        return {"bytes": totals, "activations_by_dtype": by_dtype, "nodes": nodes}


VIEW_BACKWARDS = ("TBackward", "TransposeBackward", "PermuteBackward", "SelectBackward", "SliceBackward",
                  "ViewBackward", "UnsafeViewBackward", "ReshapeAliasBackward", "AsStridedBackward",
                  "ExpandBackward", "SqueezeBackward", "UnsqueezeBackward", "AliasBackward")


def is_param_cast(t):
    """Whether t is autocast's copy of a weight, or a view of one: its
    autograd history is a cast of a leaf, through views alone."""
    fn, cast = t.grad_fn, False
    for _ in range(8):
        if fn is None:
            return False
        name = type(fn).__name__.rstrip("0123456789")
        if name == "AccumulateGrad":
            return cast
        if name == "ToCopyBackward":
            cast = True
        elif name not in VIEW_BACKWARDS:
            return False
        nxt = [f for f, _ in fn.next_functions if f is not None]
        if len(nxt) != 1:
            return False
        fn = nxt[0]
    return False


class NullCtx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def finite_json(v):
    """v with its non-finite floats as strings (JSON has no NaN; pipe
    reads "NaN", "Infinity" and "-Infinity" back as numbers)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dict):
        return {k: finite_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite_json(x) for x in v]
    return v


def is_oom(e):
    if torch is None:
        return False
    cls = getattr(torch.cuda, "OutOfMemoryError", None)
    if cls is not None and isinstance(e, cls):
        return True
    msg = str(e)
    return isinstance(e, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg)


def max_rss():
    """This process's peak resident memory: VmHWM, the kernel's figure for
    its own address space. ru_maxrss is the fallback only: Linux carries
    into it, across exec, the peak of the process that started it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def hello():
    info = {"protocol": PROTOCOL, "python": sys.version.split()[0], "executable": sys.executable,
            "torch": torch.__version__, "cuda": bool(torch.cuda.is_available()),
            "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0,
            "cuda_version": getattr(torch.version, "cuda", None) or "",
            "compile": hasattr(torch, "compile") and version_tuple(torch.__version__) >= (2, 0, 0),
            "distributed": bool(torch.distributed.is_available()),
            "gloo": bool(torch.distributed.is_available() and torch.distributed.is_gloo_available()),
            "nccl": bool(torch.distributed.is_available() and torch.distributed.is_nccl_available()),
            "cpu_bf16_autocast": hasattr(torch, "autocast"),
            "threads": torch.get_num_threads()}
    if info["cuda"]:
        names = []
        for i in range(info["cuda_devices"]):
            p = torch.cuda.get_device_properties(i)
            names.append({"name": p.name, "memory": p.total_memory,
                          "capability": f"{p.major}.{p.minor}",
                          "bf16": bool(p.major >= 8)})
        info["gpus"] = names
    return info


def main():
    # The protocol's stream is the original stdout; stdout itself now goes
    # to stderr, so nothing a library prints can break the protocol.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    out = os.fdopen(out_fd, "w", buffering=1)
    sys.stdout = sys.stderr
    # Ctrl-C goes to pipe, which finishes the step and asks for a checkpoint.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import_torch()
    except Exception as e:  # noqa: BLE001
        out.write(json.dumps({"ok": False, "kind": "no-torch",
                              "error": f"{type(e).__name__}: {e}", "executable": sys.executable,
                              "python": sys.version.split()[0]}) + "\n")
        out.flush()
        return 3
    define_modules()
    define_net()
    w = Worker(out)
    w.reply({"ok": True, **hello()})
    w.serve(sys.stdin)
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        sys.exit(main())
    print(__doc__)
