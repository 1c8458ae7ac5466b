"""make gpu-smoke's split of a step's host time between pipe's network
and torch: in one process, pipe's network for an MLP example, built by the
torch engine's own worker code (pipe_torch's Worker.cmd_build on the spec
gpucheck -spec-dir wrote, so with the plan's compile, fused optimizer and
autocast), and the same MLP written by hand in torch.nn, eager and under
torch.compile, each trained in a tight loop on one device-resident batch
(zero_grad, forward, loss, backward, step). Per variant: milliseconds a
step by the host clock between two synchronisations, and the host's share
(the time to queue the steps before the synchronisation). The rounds
alternate the variants, and each figure is the median of the rounds.

    python3 mlp_split.py --module-dir DIR --spec DIR/fashion_mlp.spec.json [--steps 200] [--warmup 20] [--rounds 3]

prints one JSON object. Torch without torch.compile gives the compiled
variant as an error and goes on.
"""
import argparse
import json
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--module-dir", required=True, help="the folder holding pipe_torch (gpucheck -spec-dir)")
    ap.add_argument("--spec", required=True)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=0, help="0: the spec's batch")
    a = ap.parse_args()
    out = {"what": "pipe's network (the worker's build) against a hand-written MLP, in one process",
           "steps": a.steps, "warmup": a.warmup, "rounds": a.rounds,
           "measured_by": "host clock around torch.cuda.synchronize; host_ms: queueing the steps, before the sync"}
    try:
        run(a, out)
    except Exception as e:  # noqa: BLE001 - the smoke check records any failure
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
    json.dump(out, sys.stdout, indent=2)
    print()
    return 1 if "error" in out else 0


def run(a, out):
    sys.path.insert(0, a.module_dir)
    import pipe_torch
    pipe_torch.setup()
    import torch
    from pipe_torch import protocol, wire
    from pipe_torch.worker import Worker

    with open(a.spec) as f:
        spec = json.load(f)
    w = Worker(open(os.devnull, "w"))
    built = w.cmd_build(wire.decode(protocol.REQUESTS["build"], {"spec": spec}))
    out.update(torch=torch.__version__, device=str(w.device), applied=built["applied"], params=built["params"])
    dev, cuda = w.device, w.cuda
    n = a.batch or int(spec.get("batch") or 128)
    out["batch"] = n
    x = torch.randn([n] + list(w.input_shape), device=dev)
    classes = int(w.out_shape[-1])
    y = torch.randint(0, classes, (n,), device=dev)
    lr = float(spec["optimizer"].get("lr") or 1e-3)

    def pipe_step():
        w.opt.zero_grad(set_to_none=True)
        with w.autocast():
            logits, o = w.forward_model()(x)
        loss = pipe_torch.compute_loss(w.loss_kind, logits, o, y.float(), None, n, w.out_shape, w.ends_sigmoid)
        loss.backward()
        w.opt.step()

    variants = {"pipe_network": pipe_step}
    dims = mlp_dims(spec)
    if dims is None:
        out["hand_written"] = "the spec is not an MLP (flatten, dense and relu): no hand-written twin"
    else:
        out["hand_written_dims"] = dims
        hand_params = sum(dims[i] * dims[i + 1] + dims[i + 1] for i in range(len(dims) - 1))
        if hand_params != built["params"]:
            raise RuntimeError(f"the hand-written MLP has {hand_params} parameters, pipe's {built['params']}")
        variants["hand_eager"] = hand_step(torch, dims, x, y, lr, w, compiled=False)
        try:
            if not hasattr(torch, "compile"):
                raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
            variants["hand_compiled"] = hand_step(torch, dims, x, y, lr, w, compiled=True)
        except Exception as e:  # noqa: BLE001 - recorded, the others go on
            out["hand_compiled_error"] = f"{type(e).__name__}: {e}"[:1000]

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    rows = {k: {"ms": [], "host_ms": []} for k in variants}
    for name, step in list(variants.items()):
        try:
            for _ in range(a.warmup):
                step()
            sync()
        except Exception as e:  # noqa: BLE001
            rows.pop(name)
            out[name + "_error"] = f"{type(e).__name__}: {e}"[:1000]
    for _ in range(a.rounds):
        for name in rows:
            step = variants[name]
            sync()
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step()
            t1 = time.perf_counter()
            sync()
            t2 = time.perf_counter()
            rows[name]["ms"].append((t2 - t0) * 1e3 / a.steps)
            rows[name]["host_ms"].append((t1 - t0) * 1e3 / a.steps)
    out["variants"] = {k: {"ms_per_step": statistics.median(v["ms"]), "host_ms_per_step": statistics.median(v["host_ms"]),
                           "rounds_ms": v["ms"]} for k, v in rows.items()}


def mlp_dims(spec):
    """The widths of an MLP spec (flatten, then dense layers with relu
    between them), input first; None for any other network."""
    nodes = spec["nodes"]
    ops = [nd["op"] for nd in nodes]
    if any(op not in ("input", "flatten", "dense", "relu") for op in ops):
        return None
    feats = 1
    for d in spec["input"]:
        feats *= int(d)
    dims = [feats]
    for nd in nodes:
        if nd["op"] == "dense":
            dims.append(int(nd["out"][-1]))
    return dims if len(dims) > 1 else None


def hand_step(torch, dims, x, y, lr, w, compiled):
    """One training step of the MLP written by hand: Linear and ReLU in a
    Sequential, the same optimizer kind and fusing as the worker's, the
    same autocast."""
    import torch.nn.functional as F
    layers = [torch.nn.Flatten()]
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    m = torch.nn.Sequential(*layers).to(w.device)
    kind = type(w.opt)
    try:
        opt = kind(m.parameters(), lr=lr, fused=True) if w.fused else kind(m.parameters(), lr=lr)
    except (TypeError, RuntimeError):
        opt = kind(m.parameters(), lr=lr)
    net = torch.compile(m) if compiled else m

    def step():
        opt.zero_grad(set_to_none=True)
        with w.autocast():
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    return step


if __name__ == "__main__":
    sys.exit(main())
