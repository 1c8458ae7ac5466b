"""The plain PyTorch loop that make gpu-smoke holds pipe's ResNet-50 row
against: torchvision's resnet50 (random weights), channels_last, autocast,
fused AdamW where the torch has it, cudnn.benchmark, batches from pinned
host memory copied non-blocking, as a tuned hand-written script trains;
eager, or under torch.compile with --compile.
It prints one JSON object: images/s over the timed steps by the host clock
after torch.cuda.synchronize; the allocator's peak over step 1 (the peak
statistics reset before it) and over the steady steps (reset after the
warm-up), each with torch.cuda.memory_stats at that point.

    python3 resnet50_plain.py [--device cuda:0] [--batch 256] [--steps 30] [--warmup 10] [--compile]
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--compile", action="store_true", help="the model under torch.compile")
    a = ap.parse_args()
    out = {"model": "torchvision resnet50", "batch": a.batch, "steps": a.steps, "warmup": a.warmup,
           "precision": a.precision, "device": a.device, "mode": "compiled" if a.compile else "eager"}
    try:
        run(a, out)
    except Unavailable as e:  # not a failure: this Python has no such row
        out["unavailable"] = str(e)
    except Exception as e:  # noqa: BLE001 - the smoke check records any failure
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
    json.dump(out, sys.stdout, indent=2)
    print()
    return 1 if "error" in out else 0


class Unavailable(Exception):
    """What this row needs is not installed: the row says so, and the
    script exits 0 (torchvision absent, a torch without torch.compile)."""


def peaks(torch, dev):
    """The allocator's peaks since the last reset, and its statistics."""
    torch.cuda.synchronize(dev)
    return {"max_memory_allocated": torch.cuda.max_memory_allocated(dev),
            "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
            "memory_stats": dict(torch.cuda.memory_stats(dev))}


def run(a, out):
    import torch
    import torch.nn.functional as F
    out["torch"] = torch.__version__
    try:
        import torchvision
    except ImportError as e:
        raise Unavailable(f"torchvision is not installed for this Python ({e}); no torchvision row") from e
    out["torchvision"] = torchvision.__version__
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
        out["gpu"] = torch.cuda.get_device_name(dev)
    m = torchvision.models.resnet50(num_classes=1000).to(dev).to(memory_format=torch.channels_last)
    try:
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, fused=cuda)
        out["optimizer"] = "adamw fused" if cuda else "adamw"
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        out["optimizer"] = "adamw"
    net = m
    if a.compile:
        if not hasattr(torch, "compile"):
            raise Unavailable(f"torch {torch.__version__} has no torch.compile; no compiled row")
        net = torch.compile(m)
    x = torch.randn(a.batch, 3, 224, 224)
    y = torch.randint(0, 1000, (a.batch,))
    if cuda:
        x, y = x.pin_memory(), y.pin_memory()
    dtype = torch.bfloat16 if a.precision == "bf16" else None

    def step():
        xb = x.to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
        yb = y.to(dev, non_blocking=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dtype is not None):
            loss = F.cross_entropy(net(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    m.train()
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    step()
    sync()
    out["step1_seconds"] = time.perf_counter() - t0  # with the compile, when there is one
    if cuda:
        out["step1"] = peaks(torch, dev)
    for _ in range(a.warmup - 1):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    secs = time.perf_counter() - t0
    out["seconds"] = secs
    out["images_per_second"] = a.batch * a.steps / secs
    out["last_loss"] = float(loss)
    if cuda:
        out["steady"] = peaks(torch, dev)
        # The largest of the two, as the older reports gave it.
        out["max_memory_allocated"] = max(out["step1"]["max_memory_allocated"], out["steady"]["max_memory_allocated"])
        out["max_memory_reserved"] = max(out["step1"]["max_memory_reserved"], out["steady"]["max_memory_reserved"])


if __name__ == "__main__":
    sys.exit(main())
