"""TorchScript export: the model traced in evaluation mode, checked on a
second input, and saved with pipe's metadata as extra files."""

import os
import warnings

import torch
import torch.nn as nn

from .modules import FORWARDS
from .wire import Failure


class Exported(nn.Module):
    """What predict gives: the model's output (after a final softmax or
    sigmoid), restored to the target's units when training standardised
    the target."""

    def __init__(self, net, out_shape, mean, std):
        super().__init__()
        self.net = net
        self.restore = bool(mean)
        if self.restore:
            shape = [1] + ([len(mean)] + [1] * (len(out_shape) - 1) if len(mean) > 1 else [])
            self.register_buffer("target_mean", torch.tensor(mean, dtype=torch.float32).reshape(shape))
            self.register_buffer("target_std", torch.tensor(std, dtype=torch.float32).reshape(shape))

    def forward(self, x):
        y = self.net(x)[1]
        if self.restore:
            y = y * self.target_std + self.target_mean
        return y


class Node(nn.Module):
    """One node of the net on its inputs: what untraceable traces alone."""

    def __init__(self, net, n):
        super().__init__()
        self.net = net
        self.n = n

    def forward(self, *xs):
        return self.net.run_node(self.n, list(xs))


def reason(e, lines=2, size=300):
    """An exception's first lines, for a one-line report."""
    parts = [s.strip() for s in str(e).splitlines() if s.strip()]
    text = "; ".join(parts[:lines]) or type(e).__name__
    return text if len(text) <= size else text[:size - 3] + "..."


class ExportMixin:
    """The Worker's torchscript command."""

    def cmd_torchscript(self, msg):
        net = self.net
        net.eval()
        fake = os.environ.get("PIPE_TORCH_FAKE_UNTRACEABLE")
        saved = FORWARDS.get(fake)
        if fake:
            FORWARDS[fake] = frozen_value(saved or module_forward)
        try:
            return self.torchscript(net, msg)
        finally:
            if saved is not None:
                FORWARDS[fake] = saved
            elif fake:
                del FORWARDS[fake]
            net.train()

    def torchscript(self, net, msg):
        mod = Exported(net, self.out_shape, msg.get("target_mean") or [], msg.get("target_std") or []).eval()
        # Two inputs of different batch sizes: the check runs the trace on
        # the second, so a batch size or a value frozen into it shows.
        g = torch.Generator().manual_seed(0)
        x1 = torch.randn([2] + list(self.input_shape), generator=g).to(self.device)
        x2 = torch.randn([3] + list(self.input_shape), generator=g).to(self.device)
        method = "trace"
        with torch.no_grad():
            try:
                sm = torch.jit.trace(mod, (x1,), check_inputs=[(x2,)], check_tolerance=1e-5)
            except Exception as te:  # noqa: BLE001 - any failure is reported with its node
                method = "script"
                try:
                    sm = torch.jit.script(mod)
                except Exception as se:  # noqa: BLE001
                    raise Failure("unsupported", self.untraceable(net, x1, x2, te, se)) from te
        extra = dict(msg.get("extra") or {})
        torch.jit.save(sm, msg["path"], _extra_files=extra)
        nodes = sum(1 for _ in sm.inlined_graph.nodes()) if hasattr(sm, "inlined_graph") else 0
        return {"method": method, "nodes": nodes, "torch": torch.__version__}

    def untraceable(self, net, x1, x2, trace_err, script_err):
        """Which node cannot be traced, and why: each node traced alone on
        the inputs the whole net gave it, checked on the second input's."""
        outs = []
        for x in (x1, x2):
            got = {}
            net.record = got.__setitem__
            try:
                with torch.no_grad():
                    net(x)
            finally:
                net.record = None
            outs.append(got)
        for n in net.nodes:
            if n["op"] == "input":
                continue
            args = [tuple(o[j] for j in n["inputs"]) for o in outs]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", torch.jit.TracerWarning)
                try:
                    with torch.no_grad():
                        torch.jit.trace(Node(net, n), args[0], check_inputs=[args[1]], check_tolerance=1e-5)
                    continue
                except Exception as e:  # noqa: BLE001
                    err = e
            # The tracer's warning says what it froze; the check, that it
            # mattered.
            why = [reason(w.message, 1) for w in caught if issubclass(w.category, torch.jit.TracerWarning)][:1]
            return (f"node {n['name']} (op {n['op']}) cannot be traced: {'; '.join(why + [reason(err)])} "
                    f"(nor can the model be scripted: {reason(script_err, 1, 120)})")
        return f"the model cannot be traced ({reason(trace_err)}) nor scripted ({reason(script_err)})"


def module_forward(net, n, m, xs):
    return m(xs[0])


def frozen_value(f):
    """f with a Python number read from its output, which a trace freezes
    as a constant: the test's stand-in for an op that cannot be traced
    (PIPE_TORCH_FAKE_UNTRACEABLE names the op). Its values are f's."""
    def g(net, n, m, xs):
        y = f(net, n, m, xs)
        return y - float(y.mean()) + y.mean()
    return g
