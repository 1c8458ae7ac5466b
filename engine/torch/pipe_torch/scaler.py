"""fp16's loss scaling: PyTorch's GradScaler, or a stand-in for tests."""

import os

import torch


def make_scaler(cuda):
    """The GradScaler for fp16 training on CUDA. On a CPU it is refused,
    except under the test hook PIPE_TORCH_FAKE_SCALER=1, which gives the
    stand-in below, so that the worker's handling of an overflowed step
    is tested where no GPU is."""
    if cuda:
        amp = getattr(torch, "amp", None)
        if hasattr(amp, "GradScaler"):  # torch 2.3 and later
            return torch.amp.GradScaler("cuda")
        return torch.cuda.amp.GradScaler()
    if os.environ.get("PIPE_TORCH_FAKE_SCALER") == "1":
        return StandInScaler()
    return None


class StandInScaler:
    """GradScaler's contract on a CPU (test hook): scale multiplies the
    loss, unscale_ divides the gradients and notes whether any is not
    finite, step skips the optimizer's step then, and update halves the
    scale after an overflow. Its first scale, 2^128, overflows fp32 on
    purpose, so the first step always overflows (as fp16's first steps
    often do); after that it backs off to 2^15, whose products are
    exact."""

    def __init__(self):
        self.scale_value = 2.0 ** 128
        self.found_inf = None
        self.unscaled = False
        self.skipped = 0

    def scale(self, loss):
        return loss * self.scale_value

    def unscale_(self, opt):
        if self.unscaled:
            return
        inv = 1.0 / self.scale_value
        bad = False
        for g in opt.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    p.grad.mul_(inv)
                    bad = bad or not bool(torch.isfinite(p.grad).all())
        self.found_inf, self.unscaled = bad, True

    def step(self, opt):
        self.unscale_(opt)
        if self.found_inf:
            self.skipped += 1
            return None
        return opt.step()

    def update(self):
        if self.found_inf:
            self.scale_value = 2.0 ** 15 if self.scale_value > 2.0 ** 15 else self.scale_value / 2
        self.found_inf, self.unscaled = None, False
