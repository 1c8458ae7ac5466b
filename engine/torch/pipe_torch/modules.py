"""The torch.nn modules of pipe's own ops, and the module of each node."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class GroupNorm32(nn.Module):
    """nn.GroupNorm's parameters and function, computed in fp32 whatever
    the autocast: CUDA's autocast casts group_norm to fp32 already, and
    CPU's (torch 1.13) hands it bf16 inputs that its kernel refuses beside
    fp32 weights. A module of its own, not a subclass, so that importing
    this file needs no more of torch.nn than the version check allows."""

    def __init__(self, groups, channels, eps):
        super().__init__()
        self.groups, self.eps = groups, eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        return F.group_norm(x.float(), self.groups, self.weight, self.bias, self.eps)


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation with a SiLU, as EfficientNet's
    blocks build it: x scaled per channel by
    sigmoid(fc2(silu(fc1(mean of x over H and W)))), its state_dict keys
    fc1.weight, fc1.bias, fc2.weight, fc2.bias."""

    def __init__(self, channels, squeeze):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.fc2(F.silu(self.fc1(s))))


class DropPath(nn.Module):
    """torchvision.ops.StochasticDepth(p, "row"): in training each sample
    is zeroed whole with probability p, else scaled by 1/(1-p); the
    identity in evaluation or at p 0."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        noise = torch.empty([x.shape[0]] + [1] * (x.dim() - 1), dtype=x.dtype, device=x.device)
        return x * noise.bernoulli_(keep).div_(keep)


# MODULES maps an op to the function that builds a node's module,
# f(a, ins, out): its settings (the Go engine's torchOps), its input
# shapes and its output shape, without the batch. An op with no entry
# has no parameters and no module (relu, add, flatten, ...).
MODULES = {}


def module(*ops):
    """Registers the decorated function as the module builder of ops."""
    def register(f):
        for op in ops:
            if op in MODULES:
                raise ValueError(f"op {op} has two module builders")
            MODULES[op] = f
        return f
    return register


def make_module(n):
    f = MODULES.get(n["op"])
    return f(n["args"], n["in"], n["out"]) if f else None


def _volume(ins):
    return len(ins[0]) == 4 if ins else False  # [C, D, H, W]: the 3-D module


@module("conv")
def conv_module(a, ins, out):
    if _volume(ins):
        return nn.Conv3d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                         padding=a["padding"], bias=a["bias"])
    return nn.Conv2d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                     padding=a["padding"], dilation=a["dilation"], groups=a["groups"], bias=a["bias"])


@module("convtranspose")
def convtranspose_module(a, ins, out):
    if _volume(ins):
        return nn.ConvTranspose3d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                                  padding=a["padding"], bias=a["bias"])
    return nn.ConvTranspose2d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                              padding=a["padding"], groups=a.get("groups", 1), bias=a["bias"])


@module("maxpool")
def maxpool_module(a, ins, out):
    cls = nn.MaxPool3d if _volume(ins) else nn.MaxPool2d
    return cls(a["kernel_size"], stride=a["stride"], padding=a["padding"])


@module("avgpool")
def avgpool_module(a, ins, out):
    return nn.AvgPool2d(a["kernel_size"], stride=a["stride"], padding=a["padding"])


@module("dense")
def dense_module(a, ins, out):
    return nn.Linear(ins[0][-1], a["out_features"], bias=a["bias"])


@module("lowrank_dense")
def lowrank_module(a, ins, out):
    return LowRank(ins[0][-1], a["out_features"], a["terms"], a["rank"], a["bias"])


@module("sketched_dense")
def sketched_dense_module(a, ins, out):
    return SKLinear(ins[0][-1], a["out_features"], a["terms"], a["rank"], a["bias"])


@module("sketched_conv")
def sketched_conv_module(a, ins, out):
    return SKConv2d(ins[0][0], a["out_channels"], a["kernel_size"], a["stride"], a["padding"],
                    a["terms"], a["rank"], a["bias"])


@module("batchnorm")
def batchnorm_module(a, ins, out):
    cls = {4: nn.BatchNorm3d, 3: nn.BatchNorm2d}.get(len(ins[0]), nn.BatchNorm1d)
    return cls(ins[0][0], eps=a["eps"], momentum=a["momentum"])


@module("layernorm")
def layernorm_module(a, ins, out):
    return nn.LayerNorm(ins[0][-1], eps=a["eps"])


@module("instancenorm")
def instancenorm_module(a, ins, out):
    return nn.InstanceNorm2d(ins[0][0], eps=a["eps"], affine=a["affine"])


@module("groupnorm")
def groupnorm_module(a, ins, out):
    return GroupNorm32(a["groups"], ins[0][0], a["eps"])


@module("se")
def se_module(a, ins, out):
    return SqueezeExcitation(ins[0][0], a["squeeze_channels"])


@module("dropout")
def dropout_module(a, ins, out):
    return nn.Dropout(a["p"])


@module("drop_path")
def drop_path_module(a, ins, out):
    return DropPath(a.get("p", 0.0))


@module("class_token")
def class_token_module(a, ins, out):
    return ClassToken(out[-1])


@module("pos_embed")
def pos_embed_module(a, ins, out):
    return PosEmbed(out)


@module("attention")
def attention_module(a, ins, out):
    # torchvision's EncoderBlock.self_attention: its parameters are
    # in_proj_weight [3D, D], in_proj_bias, out_proj.weight, out_proj.bias.
    return nn.MultiheadAttention(ins[0][-1], a["heads"], dropout=a.get("dropout", 0.0), batch_first=True)


@module("random_attention")
def random_attention_module(a, ins, out):
    return RandAttention(ins[0][-1], a["heads"], a["features"], a["causal"], a["kernel"])


# FORWARDS maps an op to how a node of it runs, f(net, n, m, xs): net the
# Net, n the node, m its module (None when make_module gives none), xs
# its inputs. A node of an op with a module and no forward here runs its
# module on its one input (conv, dense, the norms, pooling, dropout).
FORWARDS = {}


def forward(*ops):
    """Registers the decorated function as the forward of ops."""
    def register(f):
        for op in ops:
            if op in FORWARDS:
                raise ValueError(f"op {op} has two forwards")
            FORWARDS[op] = f
        return f
    return register


@forward("attention")
def attention_forward(net, n, m, xs):
    # nn.MultiheadAttention as torchvision's encoder block calls
    # it: self-attention, no attention weights returned.
    # A causal mask is True above the diagonal: those scores
    # are left out of the softmax.
    mask = None
    if n["args"].get("causal"):
        t = xs[0].shape[1]
        mask = torch.ones(t, t, dtype=torch.bool, device=xs[0].device).triu(1)
    return m(xs[0], xs[0], xs[0], need_weights=False, attn_mask=mask)[0]


@forward("tokens")
def tokens_forward(net, n, m, xs):
    # torchvision's _process_input: [N, D, H, W] to [N, H·W, D],
    # a view.
    x = xs[0]
    return x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)


@forward("select_token")
def select_token_forward(net, n, m, xs):
    return xs[0][:, 0]


@forward("mean_tokens")
def mean_tokens_forward(net, n, m, xs):
    return xs[0].mean(dim=1)


@forward("batchnorm")
def batchnorm_forward(net, n, m, xs):
    sync = getattr(m, "sync_forward", None)
    if sync is not None:
        # sync_batchnorm: statistics over every rank's samples; a
        # recomputed segment's pass leaves the running ones alone.
        return sync(xs[0], not net.recomputing)
    if net.recomputing:
        # A recomputed segment normalises with the batch's own
        # statistics, exactly as the first pass did, without
        # updating the running statistics a second time: the
        # same op with momentum 0 (running·1 + batch·0), so that
        # it saves the same tensors as the first pass, which
        # checkpoint matches one for one.
        return F.batch_norm(xs[0], m.running_mean, m.running_var, m.weight, m.bias, True, 0.0, m.eps)
    return m(xs[0])


@forward("input")
def input_forward(net, n, m, xs):
    return xs[0]


@forward("relu")
def relu_forward(net, n, m, xs):
    return F.relu(xs[0])


@forward("gelu")
def gelu_forward(net, n, m, xs):
    return F.gelu(xs[0])


@forward("silu")
def silu_forward(net, n, m, xs):
    return F.silu(xs[0])


@forward("hardswish")
def hardswish_forward(net, n, m, xs):
    return F.hardswish(xs[0])


@forward("sigmoid")
def sigmoid_forward(net, n, m, xs):
    return torch.sigmoid(xs[0])


@forward("tanh")
def tanh_forward(net, n, m, xs):
    return torch.tanh(xs[0])


@forward("softmax")
def softmax_forward(net, n, m, xs):
    return F.softmax(xs[0], dim=1)


@forward("flatten")
def flatten_forward(net, n, m, xs):
    return torch.flatten(xs[0], 1)


@forward("leakyrelu")
def leakyrelu_forward(net, n, m, xs):
    return F.leaky_relu(xs[0], n["args"]["negative_slope"])


@forward("pixelshuffle")
def pixelshuffle_forward(net, n, m, xs):
    return F.pixel_shuffle(xs[0], n["args"]["upscale_factor"])


@forward("gap")
def gap_forward(net, n, m, xs):
    y = (F.adaptive_avg_pool3d if xs[0].dim() == 5 else F.adaptive_avg_pool2d)(xs[0], 1)
    if not n["args"]["keepdims"]:
        y = torch.flatten(y, 1)
    return y


@forward("upsample")
def upsample_forward(net, n, m, xs):
    a = n["args"]
    kw = {"align_corners": a["align_corners"]} if a["mode"] in ("bilinear", "trilinear") else {}
    return F.interpolate(xs[0], size=tuple(n["out"][1:]), mode=a["mode"], **kw)


@forward("concat")
def concat_forward(net, n, m, xs):
    return torch.cat(xs, dim=1)


@forward("add")
def add_forward(net, n, m, xs):
    y = xs[0]
    s = n["args"]["scale"] or 1  # 0: no scale
    if s != 1:
        y = y * s  # add's scale: a scaled residual
    for t in xs[1:]:
        y = y + t
    return y


class LowRank(nn.Module):
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


def sign_sketch(*shape, rank):
    """Panther's scaled_sign_sketch: ±1/√rank, fair coins."""
    return torch.sign(torch.rand(*shape) - 0.5) / rank ** 0.5


class SKLinear(nn.Module):
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


class SKConv2d(nn.Module):
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


class ClassToken(nn.Module):
    """torchvision's VisionTransformer.class_token, [1, 1, D]: prepended
    to every sample's tokens."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1, 1, d))

    def forward(self, x):
        return torch.cat([self.weight.expand(x.shape[0], -1, -1), x], dim=1)


class PosEmbed(nn.Module):
    """torchvision's Encoder.pos_embedding, [1, T, D], added to the
    tokens."""

    def __init__(self, shape):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(1, *shape).normal_(std=0.02))

    def forward(self, x):
        return x + self.weight


class RandAttention(nn.Module):
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


def autocast_dtype(device_type):
    """The dtype autocast computes in on this device now, None when off."""
    get = getattr(torch, "get_autocast_dtype", None)
    if get is not None:  # torch 2.4 and later: one API for every device
        return get(device_type) if torch.is_autocast_enabled(device_type) else None
    if device_type == "cuda":
        if torch.is_autocast_enabled():
            get = getattr(torch, "get_autocast_gpu_dtype", None)
            return get() if get else torch.float16
        return None
    if torch.is_autocast_cpu_enabled():
        return torch.get_autocast_cpu_dtype()
    return None
