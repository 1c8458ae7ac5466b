"""terms.py: how large the terms are that each gradient sums.

engine_test.go's lockstep comparison runs it on a step where the two
engines' updates of a tensor differ by more than the test's relative
bound:

    python3 terms.py SPEC.json --module-dir DIR

It builds the spec's network in float64 with the torch engine's own
module (the pipe_torch package in DIR), loads the spec's tensors (the
state before the step, batch.x, batch.y and batch.mask), runs the
forward pass in training mode and the backward pass of the loss, and
prints one JSON object that maps each parameter to the Euclidean norm of
T, the tensor of the sums of the absolute values of the terms its
gradient adds up:

  - a convolution's or a linear layer's weight: the weight gradient of
    |x| and |dy|, its bias Σ|dy|;
  - a batchnorm's shift Σ|dy| and scale Σ|dy·x̂| over the batch and
    the positions, x̂ the input normalised with the batch's statistics;
  - any other parameter |g|, its gradient itself.

Rounding moves each term by a fraction of its size, so a float32 sum is
trusted to a fraction of |T|, not of |g|: where the terms cancel
(|g| ≪ |T|), two correct engines that add in different orders differ by
much more than |g| allows (docs/design/native-torch-twin.md).
"""

import argparse
import json
import math
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec")
    ap.add_argument("--module-dir", required=True, help="the folder holding the pipe_torch package")
    args = ap.parse_args()
    sys.path.insert(0, args.module_dir)
    import pipe_torch
    pipe_torch.setup()
    from pipe_torch import losses, net as netmod
    torch = pipe_torch.torch
    nn = torch.nn
    torch.set_num_threads(2)

    with open(args.spec) as f:
        spec = json.load(f)
    spec["segments"] = []  # every module runs once, so its hooks see one pass
    with open(os.path.join(os.path.dirname(args.spec), spec["data"]), "rb") as f:
        flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    tensors = {}
    for t in spec["tensors"]:
        n = math.prod(t["shape"])
        tensors[t["name"]] = flat[t["offset"]:t["offset"] + n].reshape(t["shape"]).to(torch.float64)

    def build(dtype):
        net = netmod.Net(spec).to(dtype)
        names = netmod.state_names(spec, net)
        with torch.no_grad():
            for name, t in tensors.items():
                if not name.startswith("batch."):
                    names[name].copy_(t.reshape(names[name].shape))
        net.train()
        return net, names

    n = spec["batch"]
    y = tensors["batch.y"].to(torch.float32)
    mask = tensors.get("batch.mask")
    ends_sigmoid = spec["nodes"][spec["output"]]["op"] == "sigmoid"

    def backward(net, dtype):
        logits, out = net(tensors["batch.x"].reshape([n] + spec["input"]).to(dtype))
        losses.compute_loss(spec["loss"], logits, out, y, mask, n, spec["out_shape"], ends_sigmoid).backward()

    net32, names32 = build(torch.float32)
    backward(net32, torch.float32)
    net, names = build(torch.float64)

    seen = {}  # module -> [x, dy]

    def hook(m, inp, out):
        rec = seen[m] = [inp[0].detach(), None]
        out.register_hook(lambda g: rec.__setitem__(1, g.detach()))

    kinds = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
    for m in net.modules():
        if isinstance(m, kinds):
            m.register_forward_hook(hook)

    backward(net, torch.float64)

    terms = {}
    for m, (x, dy) in seen.items():
        if dy is None:
            continue
        ax, ady = x.abs(), dy.abs()
        red = [0] + list(range(2, dy.dim()))  # every axis but the channels'
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            grad = {nn.Conv1d: nn.grad.conv1d_weight, nn.Conv2d: nn.grad.conv2d_weight,
                    nn.Conv3d: nn.grad.conv3d_weight}[type(m)]
            terms[m.weight] = grad(ax, m.weight.shape, ady, m.stride, m.padding, m.dilation, m.groups)
            if m.bias is not None:
                terms[m.bias] = ady.sum(red)
        elif isinstance(m, nn.Linear):
            terms[m.weight] = ady.reshape(-1, ady.shape[-1]).t() @ ax.reshape(-1, ax.shape[-1])
            if m.bias is not None:
                terms[m.bias] = ady.reshape(-1, ady.shape[-1]).sum(0)
        elif m.affine:
            mean = x.mean(red, keepdim=True)
            var = x.var(red, unbiased=False, keepdim=True)
            xhat = (x - mean) / torch.sqrt(var + m.eps)
            terms[m.weight] = (dy * xhat).abs().sum(red)
            terms[m.bias] = ady.sum(red)

    res = {}
    for name, p in names.items():
        if isinstance(p, nn.Parameter) and p.grad is not None:
            t = terms.get(p)
            g32 = names32[name].grad
            res[name] = {"terms": (t if t is not None else p.grad.abs()).norm().item(),
                         "grad": p.grad.norm().item(),
                         "float32": 0.0 if g32 is None else (g32.to(torch.float64) - p.grad).norm().item()}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
