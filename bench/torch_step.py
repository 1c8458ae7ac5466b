#!/usr/bin/python3
"""torch_step.py: PyTorch's side of pipe's step-time comparison.

It builds, in torch.nn, the network a spec written by bench/torchspec
describes (go run ./bench/cmd/torchspec), with the torch engine's own
module (the pipe_torch package, which pipe embeds and writes beside the spec, or
into the folder given with --module-dir), loads the parameters pipe
initialised, checks that it computes what pipe computed on the spec's
batch, and times training steps as a plain PyTorch loop does: zero the
gradients, forward, loss, backward, optimizer step.

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
import importlib
import json
import math
import os
import statistics
import sys
import time

pt = None  # the torch engine's module, pipe_torch
torch = None


# Tolerances of the checks against pipe, relative to the largest magnitude
# compared: both sides run float32, with different summation orders.
OUT_TOL = 1e-3
LOSS_TOL = 1e-3


def load_module(where):
    """Imports pipe_torch from where (a folder) and sets up torch."""
    global pt, torch
    if pt is not None:
        return
    sys.path.insert(0, where)
    import pipe_torch
    pipe_torch.setup()
    pt = pipe_torch
    torch = pipe_torch.torch


class Bench:
    """One model of a spec, with its batch, loss and optimizer."""

    def __init__(self, path):
        with open(path) as f:
            spec = json.load(f)
        want = importlib.import_module("pipe_torch.protocol").SPEC_VERSION  # pipe's own, generated
        if spec.get("version") != want:
            raise ValueError(f"{path}: spec version {spec.get('version')}, this script reads {want}")
        self.spec = spec
        self.name = spec["name"]
        self.net = pt.Net(spec)
        self.loss_kind = spec["loss"]
        self.ends_sigmoid = spec["nodes"][spec["output"]]["op"] == "sigmoid"
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
        self.opt, _, _ = pt.make_optimizer(spec["optimizer"], list(self.net.parameters()))

    def check_params(self):
        """The parameter count, node by node, must be pipe's."""
        for n in self.spec["nodes"]:
            key = pt.module_key(n["name"])
            got = sum(p.numel() for p in self.net.layers[key].parameters()) if key in self.net.layers else 0
            if got != n["params"]:
                raise ValueError(f"node {n['name']} ({n['op']}): torch has {got} parameters, pipe {n['params']}")
        if self.params != self.spec["params"]:
            raise ValueError(f"torch has {self.params} parameters, pipe {self.spec['params']}")

    def load_state(self):
        """Copies pipe's parameters and buffers into the modules by name."""
        want = pt.state_names(self.spec, self.net)
        seen = set()
        for name, t in self.tensors.items():
            if name.startswith(("batch.", "check.")):
                continue
            if name not in want:
                raise ValueError(f"pipe's tensor {name} has no counterpart in the torch model")
            dst = want[name]
            if tuple(dst.shape) != tuple(t.shape):
                raise ValueError(f"pipe's {name} has shape {list(t.shape)}, torch's {list(dst.shape)}")
            with torch.no_grad():
                dst.copy_(t)
            seen.add(name)
        missing = sorted(set(want) - seen)
        if missing:
            raise ValueError(f"pipe's state lacks {', '.join(missing[:6])}")

    def loss_fn(self, logits, out, y):
        n = y.shape[0]
        return pt.compute_loss(self.loss_kind, logits, out, y, None, n, self.spec["out_shape"], self.ends_sigmoid)

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
            logits, out = self.net(self.x)
            want_shape = [spec["batch"]] + spec["out_shape"]
            if list(out.shape) != want_shape:
                raise ValueError(f"torch's output has shape {list(out.shape)}, pipe's {want_shape}")
            ref = self.tensors["check.out"].reshape(want_shape)
            scale = max(ref.abs().max().item(), 1e-6)
            res["out_rel_diff"] = (out - ref).abs().max().item() / scale
            res["eval_loss"] = self.loss_fn(logits, out, self.y).item()
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
                res["train_loss"] = self.loss_fn(*self.net(self.x), self.y).item()
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
        loss = self.loss_fn(*self.net(self.x), self.y)
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
    ap.add_argument("--module-dir", default="", help="the folder holding the pipe_torch package (default: the spec's)")
    args = ap.parse_args()
    if args.module_dir:
        load_module(args.module_dir)
    elif args.spec:
        load_module(os.path.dirname(os.path.abspath(args.spec)))
    else:
        ap.error("give a spec, or --serve with --module-dir")
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
