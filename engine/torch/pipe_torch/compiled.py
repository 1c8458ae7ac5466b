"""torch.compile: when it is tried, and the fall back to eager when it
fails, at build time or at the first step it runs."""

import os
import shutil
import sysconfig

import torch

from .measure import is_oom
from .wire import Failure


def version_tuple(v):
    """The (major, minor, patch) of a version such as "2.11.0+cu130"."""
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


def toolchain_missing():
    """What Triton lacks to build its launcher on first use (a C compiler
    and Python.h), or None."""
    cc = os.environ.get("CC") or "gcc"
    if shutil.which(cc) is None and shutil.which("cc") is None:
        return f"no C compiler ({cc} or cc on the PATH), which Triton needs to build its launcher"
    inc = sysconfig.get_paths().get("include") or ""
    if not os.path.exists(os.path.join(inc, "Python.h")):
        return f"no Python.h in {inc} (the Python development headers), which Triton needs to build its launcher"
    return None


class FailingCompile:
    """A stand-in for torch.compile's module whose first call fails as a
    lazy compile does (PIPE_TORCH_FAKE_COMPILE=fail, for tests on a CPU
    without torch.compile)."""

    def __init__(self, model):
        self.model = model

    def __call__(self, x):
        raise RuntimeError("BackendCompilerFailed: fake compile failure (PIPE_TORCH_FAKE_COMPILE)")


class CompileMixin:
    """The Worker's torch.compile: try_compile at build time, and
    compiled_step around the first micro-batch that runs compiled."""

    def try_compile(self):
        self.compile_proven = False
        if os.environ.get("PIPE_TORCH_FAKE_COMPILE") == "fail":
            self.compiled = FailingCompile(self.model)
            self.applied["compile"] = "torch.compile"
            return
        if not hasattr(torch, "compile") or version_tuple(torch.__version__) < (2, 0, 0):
            self.applied["compile"] = f"eager (torch {torch.__version__} has no torch.compile)"
            return
        if not self.cuda:
            self.applied["compile"] = "eager (torch.compile is used on CUDA devices only)"
            return
        missing = toolchain_missing()
        if missing:
            self.applied["compile"] = f"eager (torch.compile needs {missing})"
            return
        try:
            self.compiled = torch.compile(self.model)
            self.applied["compile"] = "torch.compile"
        except Exception as e:  # noqa: BLE001
            self.compiled = None
            self.applied["compile"] = f"eager (torch.compile failed: {type(e).__name__}: {e})"

    def compiled_step(self, run):
        """Runs run(model), the forward and backward of one micro-batch.
        torch.compile compiles lazily, so its errors (Dynamo, Inductor,
        Triton's launcher) come out of the first call: then the run goes
        on eagerly, this micro-batch again from the state before it, and
        the reply's "applied" says why. An error eager mode repeats is the
        model's and is raised."""
        if self.compiled is None or getattr(self, "compile_proven", True):
            return run(self.forward_model())
        bns = [(m, m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone()) for _, m in self.bns()]
        grads = [(p, None if p.grad is None else p.grad.clone()) for p in self.net.parameters()]
        try:
            out = run(self.compiled)
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001 - any failure eager mode does not repeat is the compiler's
            if is_oom(e):
                raise
            for m, rm, rv, nt in bns:
                m.running_mean.copy_(rm)
                m.running_var.copy_(rv)
                m.num_batches_tracked.copy_(nt)
            for p, g in grads:
                p.grad = g
            self.compiled = None
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            self.applied["compile"] = f"eager (torch.compile failed at the first step: {type(e).__name__}: {msg[:300]})"
            self.applied_changed = True
            if self.dropout:
                self.seed_dropout()  # the masks the failed try drew
            return run(self.model)
        self.compile_proven = True
        return out
