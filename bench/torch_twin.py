#!/usr/bin/python3
"""torch_twin.py: the torch engine's network against pipe's native numbers.

It builds the network a spec written by bench/torchspec describes with the
torch engine's own module (the pipe_torch package, in --module-dir), loads the
parameters and buffers pipe initialised, and computes on the spec's batch,
in float64 and again in float32:

  - the output in evaluation mode (running statistics);
  - the mean loss in training mode (batch statistics) and its gradient
    with respect to each parameter pipe gave as grad.NAME.

    /usr/bin/python3 bench/torch_twin.py SPEC.json --module-dir DIR

prints one JSON object. "native" holds pipe's differences from the float64
network (check.out, check.train_loss and the grad.NAME tensors), "torch32"
PyTorch's own float32 differences from the same float64 network, and
"native_torch32" pipe's from PyTorch's float32: for outputs and gradients
the largest difference relative to the tensor's largest magnitude, for the
loss the relative difference; for gradients also ("grads_norm") the
difference's norm over the tensor's, ‖g − g₆₄‖/‖g₆₄‖ (Frobenius). The float64 network says whether pipe
computes the function; PyTorch's float32 says how well float32 can.

"float32" holds, for each gradient, the largest difference from float64
over four float32 computations of the same function: PyTorch's on the
given threads, on one thread (another summation order), and on the batch
and on the weights each moved by at most one unit roundoff (2⁻²⁴, as
float32's rounding of them may). One float32 run's error is one draw of
rounding (a relu input within rounding of zero passes a gradient in one
run and not in the next); the largest of four is how far float32 itself
lets a correct gradient fall (docs/design/native-torch-twin.md).
"float32_norm" is the same for the differences by norm.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_step  # noqa: E402  (load_module, load_tensors, rel)


# UNIT is float32's unit roundoff, the most its rounding moves a value.
UNIT = 2.0 ** -24


def run(spec, tensors, dtype, move_x=0, move_w=0):
    """The twin's evaluation output, training loss and named gradients.

    With move_x or move_w (a seed), each value of the batch or of the
    parameters is first scaled by 1 + UNIT·r, r uniform on [-1, 1)."""
    pt, torch = torch_step.pt, torch_step.torch
    F = torch.nn.functional
    net = pt.Net(spec).to(dtype)
    want = pt.state_names(spec, net)
    params = {id(p) for p in net.parameters()}

    def moved(t, seed):
        if not seed:
            return t
        g = torch.Generator().manual_seed(seed)
        r = torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1
        return t.to(torch.float64) * (1 + UNIT * r)

    for name, t in tensors.items():
        if name.startswith(("batch.", "check.", "grad.")):
            continue
        if name not in want:
            raise ValueError(f"pipe's tensor {name} has no counterpart in the torch model")
        if id(want[name]) in params:
            t = moved(t, move_w)
        with torch.no_grad():
            want[name].copy_(t.to(dtype))
    n = spec["batch"]
    x = moved(tensors["batch.x"], move_x).reshape([n] + spec["input"]).to(dtype)
    if spec["loss"] == "cross_entropy":
        target = tensors["batch.y"].to(torch.long).reshape([n] + spec["out_shape"][1:])
        loss_fn = F.cross_entropy
    elif spec["loss"] == "mse":
        target = tensors["batch.y"].reshape([n] + spec["out_shape"]).to(dtype)
        loss_fn = F.mse_loss
    else:
        raise ValueError(f"torch_twin computes cross_entropy and mse, not {spec['loss']}")
    net.eval()
    with torch.no_grad():
        _, out = net(x)
    net.train()
    logits, _ = net(x)
    loss = loss_fn(logits, target)
    loss.backward()
    grads = {name[len("grad."):]: want[name[len("grad."):]].grad.to(torch.float64)
             for name in tensors if name.startswith("grad.")}
    return {"out": out.to(torch.float64), "loss": loss.item(), "grads": grads}


def diffs(a, b):
    """a's differences from the reference b."""
    def scaled(x, ref):
        return ((x - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()

    def normed(x, ref):
        return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    return {"out": scaled(a["out"], b["out"]), "train_loss": torch_step.rel(a["loss"], b["loss"]),
            "grads": {k: scaled(a["grads"][k], b["grads"][k]) for k in b["grads"]},
            "grads_norm": {k: normed(a["grads"][k], b["grads"][k]) for k in b["grads"]}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec")
    ap.add_argument("--module-dir", required=True, help="the folder holding the pipe_torch package")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch_step.load_module(args.module_dir)
    torch_step.set_threads(args.threads)
    with open(args.spec) as f:
        spec = json.load(f)
    tensors = torch_step.load_tensors(args.spec, spec)
    torch = torch_step.torch
    f64 = run(spec, tensors, torch.float64)
    f32 = run(spec, tensors, torch.float32)
    native = {"out": tensors["check.out"].reshape(f64["out"].shape).to(torch.float64),
              "loss": tensors["check.train_loss"].item(),
              "grads": {k: tensors["grad." + k].to(torch.float64) for k in f64["grads"]}}
    others = []
    torch.set_num_threads(1)  # torch_step.set_threads would set the interop threads again
    others.append(run(spec, tensors, torch.float32))
    torch.set_num_threads(args.threads)
    others.append(run(spec, tensors, torch.float32, move_x=1))
    others.append(run(spec, tensors, torch.float32, move_w=2))
    d32 = diffs(f32, f64)
    worst, worst_norm = d32["grads"], d32["grads_norm"]
    for o in others:
        d = diffs(o, f64)
        for k in worst:
            worst[k] = max(worst[k], d["grads"][k])
            worst_norm[k] = max(worst_norm[k], d["grads_norm"][k])
    print(json.dumps({"native": diffs(native, f64), "torch32": diffs(f32, f64), "native_torch32": diffs(native, f32),
                      "float32": worst, "float32_norm": worst_norm}))


if __name__ == "__main__":
    main()
