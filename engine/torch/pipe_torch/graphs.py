"""One CUDA graph a training step (docs/design/cuda-graphs.md).

The plan decides it (engine.cuda_graph); here the worker captures the
whole step of the plan's batch (forward, backward, the fused optimizer
with capturable=True and the learning rate as a device tensor) after
graph_warmup eager steps, then copies each batch into the static inputs,
fills the learning rate in place and replays. A step of another shape
(the epoch's last batch), a scaled or accumulating one, runs eagerly. A
capture that fails falls back to eager steps, and the report says why
(applied["cuda_graph"]).

PIPE_TORCH_FAKE_GRAPH is a test hook for a CPU: "static" runs the
capture-shaped step eagerly (static buffers, the learning rate a tensor
filled in place, capturable where this torch allows it on the CPU);
"fail" makes the capture fail as CUDA's would. PIPE_TORCH_GRAPH=off keeps
a planned graph off (make gpu-smoke's row of graphs off)."""

import importlib
import os
import time

import torch

from .compiled import version_tuple
from .losses import compute_loss
from .net import zero_dead


class GraphMixin:
    """The Worker's CUDA graph: graph_setup at build, graph_train in
    place of an eager step, graph_drop when the state is replaced."""

    def graph_setup(self):
        self.graph = None
        self.graph_mode = None
        self.graph_seen = 0
        if not self.cfg.get("cuda_graph"):
            return
        fake = os.environ.get("PIPE_TORCH_FAKE_GRAPH")
        why = None
        if fake in ("static", "fail"):
            self.graph_mode = fake
        elif os.environ.get("PIPE_TORCH_GRAPH") == "off":
            why = "PIPE_TORCH_GRAPH=off"
        elif not self.cuda:
            why = "the device is not CUDA"
        elif version_tuple(torch.__version__) < (2, 2, 0):
            why = f"torch {torch.__version__}: the fused optimizers take a tensor learning rate from 2.2"
        elif not self.fused:
            why = "the optimizer is not fused"
        elif self.scaler is not None or self.gan is not None or (self.dist and self.world > 1):
            why = "loss scaling, gan mode or several ranks"
        else:
            self.graph_mode = "capture"
        if why is not None:
            self.applied["cuda_graph"] = f"eager ({why})"
            return
        self.graph_warmup = int(self.cfg.get("graph_warmup") or 3)
        self.applied["cuda_graph"] = f"pending: captured after {self.graph_warmup} eager steps of {self.spec['batch']}"

    def graph_drop(self, why):
        """Drops a captured graph whose tensors were replaced (set_state):
        the next steps warm up and capture again."""
        if self.graph_mode is None:
            return
        if self.graph is not None:
            self.graph = None
            self.graph_lr_off()
            self.applied["cuda_graph"] = f"pending: captured again after {why}"
            self.applied_changed = True
        self.graph_seen = 0

    def graph_train(self, msg):
        """One optimizer step of one micro-batch as the graph, or None
        where the eager step runs instead (another shape, a warm-up, a
        failed capture)."""
        if (self.graph_mode is None or not msg.get("zero") or msg.get("step") is None or msg["scale"] != 1.0
                or msg["n"] != self.spec["batch"]):
            return None
        step = msg["step"]
        clip = step.get("clip") or 0
        key = (msg["n"], msg.get("mask") is None, clip)
        if self.graph is None:
            if key != getattr(self, "graph_key", None):
                self.graph_key, self.graph_seen = key, 0
            if self.graph_seen < self.graph_warmup:
                self.graph_seen += 1
                return None
        elif key != self.graph_key:
            return None
        x, y, mask = self.batch(msg, True)
        self.current = []
        if self.graph is None and not self.graph_capture(x, y, mask, clip):
            return None
        if self.phases is not None:
            self.phases.begin_step()
            t0 = time.perf_counter()
        for dst, src in zip(self.graph_in, (x, y, mask)):
            if dst is not None:
                dst.copy_(src)
        self.graph_lr.fill_(step["lr"])
        if self.dropout:
            self.seed_dropout()
        if self.graph_mode == "capture":
            self.graph.replay()
            for p, g in zip(self.graph_params, self.graph_grads):
                p.grad = g
        else:
            self.graph_set_lr()
            self.graph_out = self.graph_body()
        loss = self.graph_out
        if self.phases is not None:
            self.phases.queue += time.perf_counter() - t0
            self.phases.end_step()
        self.micro += 1
        if not self.cuda:
            loss = loss.clone()  # the static output is overwritten by the next step
        res = {}
        if self.lagged:
            self.current.append((self.readback.stash(loss), msg["n"]))
        else:
            res["loss"] = loss.item()
        res.update(self.finish_step())
        if getattr(self, "applied_changed", False):
            res["applied"] = dict(self.applied)
            self.applied_changed = False
        return res

    def graph_body(self):
        """The captured step: the eager step's arithmetic for one
        micro-batch on one rank without loss scaling (train.py's run and
        optimizer_step), on the static inputs."""
        x, y, mask = self.graph_in
        self.opt.zero_grad(set_to_none=True)
        with self.autocast():
            logits, out = self.forward_model()(x)
        loss = compute_loss(self.loss_kind, logits, out, y, mask, self.spec["batch"], self.out_shape, self.ends_sigmoid)
        loss.backward()
        zero_dead(self.dead)
        if self.graph_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.graph_clip)
        self.opt.step()
        return loss.detach()

    def graph_capture(self, x, y, mask, clip):
        """Makes the static inputs and the learning rate tensor, and
        captures graph_body (on CUDA; the CPU's "static" hook only
        prepares). False, with the reason in the report, when it fails."""
        self.graph_in = [None if t is None else t.clone() for t in (x, y, mask)]
        self.graph_clip = clip
        # fp64 on the CPU, so that lr / bias_correction rounds as the
        # float's does; fp32 on CUDA, which the fused kernels read.
        dtype = torch.float32 if self.cuda else torch.float64
        self.graph_lr = torch.zeros((), dtype=dtype, device=self.device)
        self.graph_lr.fill_(self.opt.param_groups[0]["lr"])
        self.graph_params = [p for g in self.opt.param_groups for p in g["params"]]
        how = self.graph_capturable()
        if self.graph_mode == "static":
            self.graph = "static"
            self.applied["cuda_graph"] = f"static step on {self.device.type} (a test of the captured step's arithmetic; {how})"
            self.applied_changed = True
            return True
        try:
            if self.graph_mode == "fail":
                raise RuntimeError("CUDA error: operation not permitted when stream is capturing (PIPE_TORCH_FAKE_GRAPH)")
            self.graph_set_lr()
            # The warm-up's gradients go before the cache is emptied, so
            # that their blocks leave the general pool: the capture
            # allocates the graph's own in its pool.
            self.opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()  # the warm-up's blocks: the pool holds the step's tensors now
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self.graph_out = self.graph_body()
            self.graph = g
            self.graph_grads = [p.grad for p in self.graph_params]
        except Exception as e:  # noqa: BLE001 - any capture failure falls back to eager steps
            self.graph, self.graph_mode = None, None
            self.graph_lr_off()
            self.opt.zero_grad(set_to_none=True)
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            self.applied["cuda_graph"] = f"eager (capture failed: {type(e).__name__}: {msg[:300]})"
            self.applied_changed = True
            return False
        self.applied["cuda_graph"] = f"captured after {self.graph_warmup} eager steps; {how}"
        self.applied_changed = True
        return True

    def graph_capturable(self):
        """Sets the optimizer's capturable flag where this torch allows it
        on the device, and says what it did."""
        devices = getattr(importlib.import_module("torch.optim.optimizer"), "_get_capturable_supported_devices", None)
        ok = self.cuda or (devices is not None and self.device.type in devices())
        if not ok:
            return f"capturable off: torch {torch.__version__} allows it on CUDA only"
        for g in self.opt.param_groups:
            if "capturable" in g:
                g["capturable"] = True
        return "capturable optimizer, learning rate a device tensor"

    def graph_set_lr(self):
        for g in self.opt.param_groups:
            g["lr"] = self.graph_lr

    def graph_lr_off(self):
        """Back to a float learning rate and a plain optimizer."""
        lr = float(self.graph_lr) if getattr(self, "graph_lr", None) is not None else None
        for g in self.opt.param_groups:
            if lr is not None and torch.is_tensor(g["lr"]):
                g["lr"] = lr
            if g.get("capturable"):
                g["capturable"] = False
