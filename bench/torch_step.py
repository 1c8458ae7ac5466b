#!/usr/bin/python3
"""torch_step.py: PyTorch's side of pipe's step-time comparison.

It builds, in torch.nn, the network a spec written by bench/torchspec
describes (go run ./bench/cmd/torchspec), loads the parameters pipe
initialised, checks that it computes what pipe computed on the spec's
batch, and times training steps: zero the gradients, forward, loss,
backward, optimizer step.

    /usr/bin/python3 bench/torch_step.py SPEC.json [--warmup 5] [--steps 20]

prints one JSON object: the checks and the milliseconds of each timed step
with their median. With --serve it reads one JSON command a line on stdin
and answers one JSON line on stdout, so that bench/cmd/ratios can
interleave its own steps with PyTorch's without restarting Python:

    {"cmd": "load", "spec": PATH}                      -> {"ok": true, "name", "params", "out_shape", "check"}
    {"cmd": "time", "name": N, "warmup": W, "steps": S} -> {"ok": true, "ms": [...]}
    {"cmd": "quit"}

Debian's python3-torch (1.13, CPU) is the reference; nothing here needs
more than torch and the standard library.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SPEC_VERSION = 1

# Tolerances of the checks against pipe, relative to the largest magnitude
# compared: both sides run float32, with different summation orders.
OUT_TOL = 1e-3
LOSS_TOL = 1e-3


def module_key(name):
    """A node's name as a ModuleDict key (keys may not contain dots)."""
    return name.replace(".", "__")


class Net(nn.Module):
    """The graph of a spec, run node by node in its (topological) order."""

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
        # The loss reads the logits before a final softmax (cross_entropy)
        # or sigmoid (bce, dice), as pipe's losses do.
        last = self.nodes[self.output]
        loss = spec["loss"]
        if (loss == "cross_entropy" and last["op"] == "softmax") or (
            loss in ("bce", "dice") and last["op"] == "sigmoid"
        ):
            self.output = last["inputs"][0]
        # The last reader of each node, so that outputs are dropped as soon
        # as nothing reads them (autograd keeps what backward needs).
        self.last_use = {}
        for n in self.nodes:
            for j in n["inputs"]:
                self.last_use[j] = n["id"]

    def forward(self, x):
        outs = [None] * len(self.nodes)
        for n in self.nodes:
            i = n["id"]
            xs = [outs[j] for j in n["inputs"]]
            op = n["op"]
            if op == "input":
                y = x
            elif op in ("conv", "convtranspose", "dense", "batchnorm", "layernorm",
                        "maxpool", "avgpool", "dropout"):
                y = self.layers[module_key(n["name"])](xs[0])
            elif op == "relu":
                y = F.relu(xs[0])
            elif op == "gelu":
                y = F.gelu(xs[0])
            elif op == "sigmoid":
                y = torch.sigmoid(xs[0])
            elif op == "tanh":
                y = torch.tanh(xs[0])
            elif op == "softmax":
                y = F.softmax(xs[0], dim=1)
            elif op == "flatten":
                y = torch.flatten(xs[0], 1)
            elif op == "gap":
                y = F.adaptive_avg_pool2d(xs[0], 1)
                if not n["args"]["keepdims"]:
                    y = torch.flatten(y, 1)
            elif op == "upsample":
                a = n["args"]
                kw = {"align_corners": a["align_corners"]} if a["mode"] == "bilinear" else {}
                y = F.interpolate(xs[0], size=tuple(n["out"][1:]), mode=a["mode"], **kw)
            elif op == "concat":
                y = torch.cat(xs, dim=1)
            elif op == "add":
                y = xs[0]
                for t in xs[1:]:
                    y = y + t
            else:
                raise ValueError(f"node {n['name']}: op {op} is not built here")
            outs[i] = y
            if i == self.output:
                return y
            for j in n["inputs"]:
                if self.last_use.get(j) == i:
                    outs[j] = None
        raise ValueError("the output node was never reached")


def make_module(n):
    op, a, ins = n["op"], n.get("args") or {}, n["in"]
    if op == "conv":
        return nn.Conv2d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                         padding=a["padding"], dilation=a["dilation"], groups=a["groups"], bias=a["bias"])
    if op == "convtranspose":
        return nn.ConvTranspose2d(ins[0][0], a["out_channels"], a["kernel_size"], stride=a["stride"],
                                  padding=a["padding"], bias=a["bias"])
    if op == "dense":
        return nn.Linear(ins[0][-1], a["out_features"], bias=a["bias"])
    if op == "batchnorm":
        shape = ins[0]
        cls = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
        return cls(shape[0], eps=a["eps"], momentum=a["momentum"])
    if op == "layernorm":
        return nn.LayerNorm(ins[0][-1], eps=a["eps"])
    if op == "maxpool":
        return nn.MaxPool2d(a["kernel_size"], stride=a["stride"], padding=a["padding"])
    if op == "avgpool":
        return nn.AvgPool2d(a["kernel_size"], stride=a["stride"], padding=a["padding"])
    if op == "dropout":
        return nn.Dropout(a["p"])
    return None


def make_loss(kind):
    if kind == "cross_entropy":
        return nn.CrossEntropyLoss()
    if kind == "mse":
        return nn.MSELoss()
    if kind == "mae":
        return nn.L1Loss()
    if kind == "bce":
        return nn.BCEWithLogitsLoss()
    if kind == "dice":
        def dice(logits, t):
            p = torch.sigmoid(logits)
            dims = [0] + list(range(2, p.dim()))
            num = 2 * (p * t).sum(dims) + 1
            den = p.sum(dims) + t.sum(dims) + 1
            return 1 - (num / den).mean()
        return dice
    raise ValueError(f"loss {kind} is not built here")


def make_optimizer(o, params):
    kind = o["kind"]
    if kind == "adam":
        return torch.optim.Adam(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                                weight_decay=o["weight_decay"])
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                                 weight_decay=o["weight_decay"])
    if kind == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"],
                               weight_decay=o["weight_decay"])
    raise ValueError(f"optimizer {kind} is not built here")


class Bench:
    """One model of a spec, with its batch, loss and optimizer."""

    def __init__(self, path):
        with open(path) as f:
            spec = json.load(f)
        if spec.get("version") != SPEC_VERSION:
            raise ValueError(f"{path}: spec version {spec.get('version')}, this script reads {SPEC_VERSION}")
        self.spec = spec
        self.name = spec["name"]
        self.net = Net(spec)
        self.loss_kind = spec["loss"]
        self.loss_fn = make_loss(self.loss_kind)
        self.params = sum(p.numel() for p in self.net.parameters())
        self.check_params()
        self.tensors = load_tensors(path, spec)
        self.load_state()
        n = spec["batch"]
        self.x = self.tensors["batch.x"].reshape([n] + spec["input"])
        self.y = self.target(self.tensors["batch.y"], n)
        self.check = self.run_checks()
        # The optimizer comes after the checks so that its state is fresh.
        self.net.train()
        self.opt = make_optimizer(spec["optimizer"], self.net.parameters())

    def check_params(self):
        """The parameter count, node by node, must be pipe's."""
        for n in self.spec["nodes"]:
            key = module_key(n["name"])
            got = sum(p.numel() for p in self.net.layers[key].parameters()) if key in self.net.layers else 0
            if got != n["params"]:
                raise ValueError(f"node {n['name']} ({n['op']}): torch has {got} parameters, pipe {n['params']}")
        if self.params != self.spec["params"]:
            raise ValueError(f"torch has {self.params} parameters, pipe {self.spec['params']}")

    def load_state(self):
        """Copies pipe's parameters and buffers into the modules by name."""
        want = {}
        for key, m in self.net.layers.items():
            for pname, t in list(m.named_parameters(recurse=False)) + list(m.named_buffers(recurse=False)):
                if pname != "num_batches_tracked":
                    want[key + "." + pname] = t
        seen = set()
        for name, t in self.tensors.items():
            if name.startswith(("batch.", "check.")):
                continue
            node, _, attr = name.rpartition(".")
            key = module_key(node) + "." + attr
            if key not in want:
                raise ValueError(f"pipe's tensor {name} has no counterpart in the torch model")
            dst = want[key]
            if tuple(dst.shape) != tuple(t.shape):
                raise ValueError(f"pipe's {name} has shape {list(t.shape)}, torch's {list(dst.shape)}")
            with torch.no_grad():
                dst.copy_(t)
            seen.add(key)
        missing = sorted(set(want) - seen)
        if missing:
            raise ValueError(f"pipe's state lacks {', '.join(missing[:6])}")

    def target(self, y, n):
        out = self.spec["out_shape"]
        if self.loss_kind == "cross_entropy":
            return y.to(torch.long).reshape([n] + out[1:])
        return y.reshape([n] + out)

    def run_checks(self):
        """pipe's output and losses on its batch, against torch's."""
        spec, c = self.spec, self.spec["check"]
        res = {}
        self.net.eval()
        with torch.no_grad():
            out = self.net(self.x)
            want_shape = [spec["batch"]] + spec["out_shape"]
            if list(out.shape) != want_shape:
                raise ValueError(f"torch's output has shape {list(out.shape)}, pipe's {want_shape}")
            ref = self.tensors["check.out"].reshape(want_shape)
            scale = max(ref.abs().max().item(), 1e-6)
            res["out_rel_diff"] = (out - ref).abs().max().item() / scale
            res["eval_loss"] = self.loss_fn(out, self.y).item()
        res["pipe_eval_loss"] = c["eval_loss"]
        res["eval_loss_rel_diff"] = rel(res["eval_loss"], c["eval_loss"])
        bad = []
        if res["out_rel_diff"] > OUT_TOL:
            bad.append(f"outputs differ by {res['out_rel_diff']:.2e} of their largest value")
        if res["eval_loss_rel_diff"] > LOSS_TOL:
            bad.append(f"evaluation losses {res['eval_loss']:.6g} (torch) and {c['eval_loss']:.6g} (pipe)")
        if c.get("train_loss") is not None:
            # Training mode: batch statistics. Run on a copy of the running
            # statistics so that timing starts from pipe's state.
            saved = {k: v.clone() for k, v in self.net.state_dict().items()}
            self.net.train()
            with torch.no_grad():
                res["train_loss"] = self.loss_fn(self.net(self.x), self.y).item()
            self.net.load_state_dict(saved)
            res["pipe_train_loss"] = c["train_loss"]
            res["train_loss_rel_diff"] = rel(res["train_loss"], c["train_loss"])
            if res["train_loss_rel_diff"] > LOSS_TOL:
                bad.append(f"training losses {res['train_loss']:.6g} (torch) and {c['train_loss']:.6g} (pipe)")
        if bad:
            raise ValueError(f"{self.name}: torch does not compute what pipe computes: " + "; ".join(bad))
        return res

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.net(self.x), self.y)
        loss.backward()
        self.opt.step()

    def time(self, warmup, steps):
        for _ in range(warmup):
            self.step()
        ms = []
        for _ in range(steps):
            t0 = time.perf_counter()
            self.step()
            ms.append((time.perf_counter() - t0) * 1e3)
        return ms

    def info(self):
        return {"name": self.name, "params": self.params, "out_shape": self.spec["out_shape"],
                "batch": self.spec["batch"], "check": self.check, "torch": torch.__version__,
                "threads": torch.get_num_threads()}


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-6)


def load_tensors(path, spec):
    data = os.path.join(os.path.dirname(path), spec["data"])
    with open(data, "rb") as f:
        flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    out = {}
    for t in spec["tensors"]:
        n = math.prod(t["shape"])
        out[t["name"]] = flat[t["offset"]:t["offset"] + n].reshape(t["shape"]).clone()
    return out


def set_threads(n):
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set in this process


def serve(threads):
    set_threads(threads)
    benches = {}
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            cmd = json.loads(line)
            if cmd["cmd"] == "quit":
                break
            if cmd["cmd"] == "load":
                b = Bench(cmd["spec"])
                benches[b.name] = b
                reply = {"ok": True, **b.info()}
            elif cmd["cmd"] == "time":
                reply = {"ok": True, "ms": benches[cmd["name"]].time(cmd["warmup"], cmd["steps"])}
            else:
                raise ValueError(f"unknown command {cmd['cmd']}")
        except Exception as e:  # reported to the caller, which stops
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", nargs="?", help="a spec written by bench/cmd/torchspec")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: the spec's)")
    ap.add_argument("--serve", action="store_true", help="answer JSON commands on stdin")
    args = ap.parse_args()
    if args.serve:
        serve(args.threads or os.cpu_count())
        return
    if not args.spec:
        ap.error("give a spec, or --serve")
    with open(args.spec) as f:
        threads = args.threads or json.load(f)["threads"]
    set_threads(threads)
    b = Bench(args.spec)
    ms = b.time(args.warmup, args.steps)
    print(json.dumps({**b.info(), "ms": ms, "median_ms": statistics.median(ms)}, indent=1))


if __name__ == "__main__":
    main()
