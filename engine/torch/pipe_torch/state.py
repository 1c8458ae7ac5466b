"""Loading the state from pipe's state region and writing it there."""

import torch
import torch.nn as nn

from .net import module_key
from .wire import Failure


class StateMixin:
    """The Worker's state commands: set_state, get_state and layout."""

    def opt_buffers(self):
        kind = self.spec["optimizer"]["kind"]
        if kind in ("adam", "adamw"):
            return ["exp_avg", "exp_avg_sq"]
        if kind == "sgd" and self.spec["optimizer"]["momentum"] > 0:
            return ["momentum_buffer"]
        return []

    def param_of(self, name):
        t = self.names.get(name)
        return t if isinstance(t, nn.Parameter) else None

    def bns(self):
        """The model's batchnorm layers as (name, module), listed once per
        network (every step of a sync readback snapshots them)."""
        c = getattr(self, "_bns", None)
        if c is None or c[0] is not self.net:
            c = self._bns = (self.net, [(n["name"], self.net.layers[module_key(n["name"])])
                                        for n in self.spec["nodes"] if n["op"] == "batchnorm"])
        return c[1]

    def cmd_set_state(self, msg):
        self.failed = None  # a state set again trains on from there
        if self.gan is not None:
            return self.gan_set_state(msg)
        self.set_state(msg["layout"], msg["counters"])

    def set_state(self, layout, counters):
        region = self.regions["state"]
        step = int(counters.get("optimizer.step", 0))
        bufs = self.opt_buffers()
        with torch.no_grad():
            for ent in layout:
                name, off, count, shape = ent["name"], ent["offset"], ent["count"], ent["shape"]
                src = region.floats(off, count).reshape(shape)
                if name.startswith("optimizer."):
                    pname, _, buf = name[len("optimizer."):].rpartition(".")
                    p = self.param_of(pname)
                    if p is None or buf not in bufs:
                        raise Failure("error", f"state: unknown tensor {name}")
                    if step == 0:
                        continue  # a fresh optimizer: torch creates its state at the first step
                    # The buffer takes its parameter's layout (channels_last
                    # weights have NHWC strides): fused optimizers refuse
                    # state whose strides differ from the parameter's.
                    st = self.opt.state[p]
                    st[buf] = torch.empty_like(p, dtype=torch.float32, memory_format=torch.preserve_format)
                    st[buf].copy_(src)
                    if buf != "momentum_buffer":
                        st["step"] = self.step_tensor(step, p)
                    continue
                t = self.names.get(name)
                if t is None:
                    raise Failure("error", f"state: unknown tensor {name}")
                if list(t.shape) != list(shape):
                    raise Failure("error", f"state: {name} has shape {shape}; the model's is {list(t.shape)}")
                t.copy_(src.to(t.device))
            if step == 0:
                self.opt.state.clear()
            self.check_state_layout()
            for name, m in self.bns():
                m.num_batches_tracked.fill_(int(counters.get(name + ".num_batches_tracked", 0)))
        self.step_no = step
        self.graph_drop("the state was set")  # its optimizer state tensors are new
        self.micro = int(counters.get("exec.micro_step", 0))
        if "exec.seed" in counters:
            self.seed = int(counters["exec.seed"])
        self.pending = []
        self.current = []

    def check_state_layout(self):
        """Every optimizer buffer has its parameter's shape and strides, as
        the optimizer's own first step makes them."""
        for p, st in self.opt.state.items():
            for buf, v in st.items():
                if torch.is_tensor(v) and v.dim() > 0 and (v.shape != p.shape or v.stride() != p.stride()):
                    raise Failure("error", f"state: optimizer {buf} has strides {tuple(v.stride())}, its parameter "
                                  f"{tuple(p.stride())}")

    def step_tensor(self, step, p):
        if self.fused:
            return torch.tensor(float(step), dtype=torch.float32, device=p.device)
        return torch.tensor(float(step))

    def cmd_layout(self, msg):
        """The state's tensors, names and shapes, in pipe's order
        (parameters, buffers, then the optimizer's buffers): the layout of
        a model whose weights are the worker's own initialisation."""
        params, buffers = [], []
        for name, t in self.names.items():
            (params if isinstance(t, nn.Parameter) else buffers).append({"name": name, "shape": list(t.shape)})
        out = params + buffers
        bufs = self.opt_buffers()
        for p in params:
            out += [{"name": f"optimizer.{p['name']}.{buf}", "shape": p["shape"]} for buf in bufs]
        return {"layout": out}

    def cmd_get_state(self, msg):
        self.sync_device()
        if self.gan is not None:
            return self.gan_get_state(msg)
        return self.get_state(msg["layout"])

    def get_state(self, layout):
        region = self.regions["state"]
        bufs = self.opt_buffers()
        with torch.no_grad():
            for ent in layout:
                name, off, count = ent["name"], ent["offset"], ent["count"]
                dst = region.floats(off, count)
                if name.startswith("optimizer."):
                    pname, _, buf = name[len("optimizer."):].rpartition(".")
                    p = self.param_of(pname)
                    if p is None or buf not in bufs:
                        raise Failure("error", f"state: unknown tensor {name}")
                    v = self.opt.state.get(p, {}).get(buf)
                    if v is None:
                        dst.zero_()
                    else:
                        dst.copy_(v.detach().float().contiguous().reshape(-1).cpu())
                    continue
                t = self.names.get(name)
                if t is None:
                    raise Failure("error", f"state: unknown tensor {name}")
                dst.copy_(t.detach().float().contiguous().reshape(-1).cpu())
        counters = {"optimizer.step": self.step_no, "exec.micro_step": self.micro, "exec.seed": self.seed}
        for name, m in self.bns():
            counters[name + ".num_batches_tracked"] = int(m.num_batches_tracked.item())
        return {"counters": counters}
