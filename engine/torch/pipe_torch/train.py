"""Training micro-batches, the optimizer step, and evaluation."""

import contextlib
import gc
import math
import time

import torch
import torch.nn as nn

from .losses import compute_loss, masked_count
from .net import zero_dead
from .timer import Timer
from .wire import Failure


class TrainMixin:
    """The Worker's training commands: train, step, flush, clip, zero and
    eval."""

    def cmd_train(self, msg):
        if self.gan is not None:
            return self.gan_train(msg)
        if not msg.get("profile"):
            res = self.train_micro(msg, None)
            if self.phases is not None and msg.get("step") is not None:
                res["phases"] = self.phases.take()
            return res
        # Profiled: the nodes timed, eagerly (a compiled graph has no
        # nodes to time).
        timer = Timer(self.cuda, self.device)
        self.net.timer = timer
        try:
            res = self.train_micro(msg, timer)
        finally:
            self.net.timer = None
        res["spans"] = timer.spans
        return res

    def train_micro(self, msg, timer):
        if timer is None:
            res = self.graph_train(msg)  # graphs.py: None where the step runs eagerly
            if res is not None:
                return res
        n = msg["n"]
        x, y, mask = self.batch(msg, True)
        if msg.get("zero"):
            self.opt.zero_grad(set_to_none=True)
            self.current = []
        sync = msg.get("sync", True)
        scale = msg["scale"]
        if not self.lagged:
            snap = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone())
                    for _, m in self.bns()]
        if self.dropout:
            self.seed_dropout()
        # Accumulating micro-batches skip DDP's all-reduce but the last.
        ctx = self.model.no_sync() if (self.dist and not sync) else contextlib.nullcontext()

        weight = [None]  # (this rank's masked count, its gradient factor)

        def run(model):
            self.phase = "forward"
            with ctx:
                with self.autocast():
                    logits, out = model(x)
                if timer is not None:
                    tl = timer.now()
                loss = compute_loss(self.loss_kind, logits, out, y, mask, n, self.out_shape, self.ends_sigmoid)
                if timer is not None:
                    timer.add(-1, 3, tl, timer.now())
                weight[0] = self.rank_weight(y, mask, n)
                v = None
                if not self.lagged:
                    v = loss.item()
                    if not math.isfinite(v):
                        for (rm, rv, nt), (_, m) in zip(snap, self.bns()):
                            m.running_mean.copy_(rm)
                            m.running_var.copy_(rv)
                            m.num_batches_tracked.copy_(nt)
                        raise self.nonfinite(v, x)
                self.phase = "backward"
                scaled = loss
                if scale != 1.0:  # a product by 1 would add a node to the backward pass
                    scaled = scaled * scale
                if weight[0] is not None:
                    scaled = scaled * weight[0][1]
                if timer is not None:
                    tb = timer.now()
                if self.scaler is not None:
                    self.scaler.scale(scaled).backward()
                else:
                    scaled.backward()
                if timer is not None:
                    timer.backward(tb, timer.now())
            return loss, v

        if timer is None and self.phases is not None:
            self.phases.begin_step()
            t0 = time.perf_counter()
            loss, v = self.compiled_step(run)
            self.phases.queue += time.perf_counter() - t0
        elif timer is None:
            loss, v = self.compiled_step(run)
        else:
            loss, v = run(self.model)  # profiled: eager, node by node
        zero_dead(self.dead)
        self.phase = None
        self.micro += 1
        if self.dist and self.world > 1:
            # The job's loss, every rank's samples weighted by their count,
            # is what each rank reports (not its own shard's).
            loss = self.job_loss(loss, n if weight[0] is None else weight[0][0])
            if v is not None:
                v = loss.item()
        if self.lagged:
            self.current.append((self.readback.stash(loss), n))
            res = {}
        else:
            res = {"loss": v}
        step = msg.get("step")
        if step is not None:
            # The step's last micro-batch carries the optimizer step: one
            # round trip a step.
            res.update(self.cmd_step(step))
        if getattr(self, "applied_changed", False):
            res["applied"] = dict(self.applied)
            self.applied_changed = False
        return res

    def cmd_train_steps(self, msg):
        """K optimizer steps of one micro-batch each, with no message
        between them (protocol.go's trainStepsRequest). Each runs as a
        train command carrying its step does, so losses, state, counters
        and failures are those of K such commands. With sync readback the
        reply's done holds the K steps; with lagged readback those of the
        command before, read once this one's kernels are queued. A failure
        carries the steps finished before it."""
        if self.gan is not None:
            raise Failure("unsupported", "train_steps: a gan trains step by step")
        clip = msg.get("clip") or 0
        done, applied = [], None
        prev = None
        if self.lagged:
            prev, self.pending, self.batching = self.pending, [], True
        try:
            for s in msg["steps"]:
                one = {"n": s["n"], "x": s.get("x"), "y": s.get("y"), "mask": s.get("mask"), "rows": s.get("rows"),
                       "scale": s["scale"],
                       "zero": True, "sync": True, "step": {"lr": s["lr"], "clip": clip}}
                res = self.train_micro(one, None)
                applied = res.get("applied", applied)
                if not self.lagged:
                    done.append({"step": self.step_no, "losses": [res["loss"]], "n": [s["n"]]})
        except Failure as e:
            if self.lagged:
                # The command before's steps, and this one's before the failure.
                done, self.pending = self.read_losses(prev + self.pending), []
            e.extra["done"] = done
            raise
        finally:
            self.batching = False
        if self.lagged:
            done = self.read_losses(prev)
        res = {"done": done}
        if applied is not None:
            res["applied"] = applied
        if self.phases is not None:
            res["phases"] = self.phases.take()
        return res

    def rank_weight(self, y, mask, n):
        """Over several ranks, a masked loss's (count, factor): the count of
        valid positions the rank's mean is over, and world × count ÷ the
        job's count, which makes DDP's mean of the ranks' gradients the
        gradient of the job's mean over all valid positions. None for one
        rank, an unmasked loss or dice (docs/design/scale-out.md)."""
        if not (self.dist and self.world > 1):
            return None
        c = masked_count(self.loss_kind, y, mask, n, self.out_shape)
        if c is None:
            return None
        import torch.distributed as dist
        total = c.detach().clone()
        dist.all_reduce(total)
        factor = torch.where(total > 0, self.world * c.detach() / total.clamp_min(1e-30), torch.ones_like(total))
        return c.detach(), factor

    def job_loss(self, loss, n):
        """The mean loss over every rank's samples (n, a count) or valid
        positions (n, a tensor: a masked loss's): one all-reduce of
        (loss × n, n), queued behind the step's own collectives."""
        import torch.distributed as dist
        w = n.to(loss.device) if torch.is_tensor(n) else torch.tensor(float(n), device=loss.device)
        t = torch.stack([loss.detach().float() * w, w])
        dist.all_reduce(t)
        return t[0] / t[1]

    def nonfinite(self, v, x):
        """A non-finite loss: which node's output first went bad."""
        info = {"step": self.step_no, "micro_step": self.micro, "loss": v}
        if not bool(torch.isfinite(x).all()):
            info["input"] = True
            return Failure("nonfinite", "the input batch holds NaN or Inf", **info)
        for name, t in self.names.items():
            if not bool(torch.isfinite(t).all()):
                info["param"] = name
                return Failure("nonfinite", f"{name} is not finite", **info)
        bad = self.first_nonfinite(x)
        if bad is not None:
            info["node"], info["op"] = bad
        return Failure("nonfinite", "non-finite loss", **info)

    def first_nonfinite(self, x):
        net = self.net
        was = net.training
        found = [None]
        nodes = net.nodes

        def check(i, t):
            if found[0] is None and t is not None and t.is_floating_point() and not bool(torch.isfinite(t).all()):
                found[0] = (nodes[i]["name"], nodes[i]["op"])

        saved = {}
        for _, m in self.bns():
            saved[m] = (m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone())
        try:
            with torch.no_grad(), self.autocast():
                outs = [None] * len(nodes)
                for i, n in enumerate(nodes):
                    xs = [outs[j] for j in n["inputs"]] if n["op"] != "input" else [x]
                    outs[i] = net.run_node(n, xs)
                    check(i, outs[i])
                    if found[0] is not None:
                        break
        finally:
            for m, (rm, rv, nt) in saved.items():
                m.running_mean.copy_(rm)
                m.running_var.copy_(rv)
                m.num_batches_tracked.copy_(nt)
            net.train(was)
        return found[0]

    def cmd_step(self, msg):
        stop = self.agree_stop(msg)
        res = self.optimizer_step(msg)
        if stop:
            res["stop"] = True
        return res

    def agree_stop(self, msg):
        """Whether any rank was asked to stop, all-reduced with every step
        when the ranks run in several processes (Distributed.agree_stop): a
        rank that stopped alone would leave the others waiting in their
        next all-reduce. A gloo group of its own keeps it off the device."""
        if self.stop_group is None:
            return False
        import torch.distributed as dist
        flag = torch.tensor([1 if msg.get("stop") else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.stop_group)
        return bool(flag.item())

    def cmd_barrier(self, msg):
        """Waits for every rank at the stop group's barrier."""
        if self.stop_group is not None:
            import torch.distributed as dist
            dist.barrier(group=self.stop_group)

    def optimizer_step(self, msg):
        if self.gan is not None and not self.gan_step(msg):
            return self.skip_step()
        lr = msg["lr"]
        for g in self.opt.param_groups:
            g["lr"] = lr
        res = {}
        clip = msg.get("clip") or 0
        self.phase = "optimizer"
        if self.scaler is not None and clip > 0:
            self.scaler.unscale_(self.opt)
        if clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.net.parameters(), clip)
            if not self.lagged:
                res["norm"] = norm.item()
        if not self.lagged and self.scaler is None:
            # Under fp16 loss scaling an overflowed gradient is the
            # GradScaler's to skip (it lowers the scale), not an error.
            bad = self.first_bad_grad()
            if bad is not None:
                self.phase = None
                raise Failure("nonfinite", f"the gradient of {bad} is not finite", step=self.step_no,
                              micro_step=self.micro, param="the gradient of " + bad, loss=0.0)
        t0 = time.perf_counter() if self.phases is not None else 0
        if self.scaler is not None:
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            self.opt.step()
        if self.phases is not None:
            self.phases.queue += time.perf_counter() - t0
            self.phases.end_step()
        res.update(self.finish_step())
        return res

    def finish_step(self):
        """After an optimizer step, eager or replayed: the counters, the
        collector's freeze, and the lagged losses the reply carries."""
        res = {}
        self.phase = None
        self.step_no += 1
        if not self.frozen:
            self.freeze_gc()
        if self.lagged and self.batching:
            # train_steps reads its steps' losses together, a command later.
            self.pending.append((self.step_no, self.current))
            self.current = []
        elif self.lagged:
            # The losses of the step before this one: its kernels finished
            # while this step's were queued, so reading them costs no wait.
            done = self.pending
            self.pending = [(self.step_no, self.current)]
            self.current = []
            res["done"] = self.read_losses(done)
        return res

    def freeze_gc(self):
        """After the first step taken, moves every object alive (the
        model, its compiled code, torch's modules) to the collector's
        permanent generation: the collections the steps' own allocations
        set off no longer walk them (gc.freeze, Python 3.7 and later)."""
        self.frozen = True
        if hasattr(gc, "freeze"):
            gc.collect()
            gc.freeze()
            self.applied["gc"] = f"frozen after step {self.step_no} ({gc.get_freeze_count()} objects)"
        else:
            self.applied["gc"] = "not frozen: this Python has no gc.freeze"
        self.applied_changed = True

    def read_losses(self, steps):
        out = []
        for step, losses in steps:
            vals = [t.item() for t, _ in losses]
            out.append({"step": step, "losses": vals, "n": [n for _, n in losses]})
        return out

    def cmd_flush(self, msg):
        done = self.pending + ([(self.step_no + 1, self.current)] if self.current else [])
        self.pending = []
        self.current = []
        self.sync_device()
        return {"done": self.read_losses(done)}

    def first_bad_grad(self):
        # The optimizer's list of the parameters: a module walk costs more.
        grads = [p.grad for g in self.opt.param_groups for p in g["params"] if p.grad is not None]
        if not grads:
            return None
        # A sum is finite only when every term is: one reduction a tensor,
        # where an isfinite per element would allocate. On the CPU each is
        # read at once (cheaper than a stack); on a device, one read back.
        if self.cuda:
            total = float(torch.stack([g.sum(dtype=torch.float32) for g in grads]).sum())
        else:
            total = sum(g.sum(dtype=torch.float32).item() for g in grads)
        if math.isfinite(total):
            return None
        for name, t in self.names.items():
            if isinstance(t, nn.Parameter) and t.grad is not None and not bool(torch.isfinite(t.grad).all()):
                return name
        return None  # finite terms whose sum overflowed

    def cmd_clip(self, msg):
        if self.scaler is not None:
            self.scaler.unscale_(self.opt)
        norm = torch.nn.utils.clip_grad_norm_(self.net.parameters(), msg["max"])
        return {"norm": norm.item()}

    def cmd_zero(self, msg):
        self.opt.zero_grad(set_to_none=True)
        if self.gan is not None:
            self.gan["opt"].zero_grad(set_to_none=True)
        self.current = []

    def cmd_eval(self, msg):
        n = msg["n"]
        x, y, mask = self.batch(msg, False)
        net = self.net
        net.eval()
        self.phase = "evaluation"
        timer = Timer(self.cuda, self.device) if msg.get("profile") else None
        net.timer = timer
        try:
            with torch.no_grad():
                with self.autocast():
                    logits, out = net(x)
                loss = 0.0
                if y is not None:
                    if timer is not None:
                        tl = timer.now()
                    loss = compute_loss(self.loss_kind, logits, out, y, mask, n, self.out_shape, self.ends_sigmoid).item()
                    if timer is not None:
                        timer.add(-1, 3, tl, timer.now())
                ref = msg.get("out")
                if ref is not None:
                    dst = self.regions["out"].floats(ref[0], ref[1])
                    dst.copy_(out.float().contiguous().reshape(-1).cpu())
        finally:
            net.train()
            net.timer = None
        self.phase = None
        if timer is not None:
            return {"loss": loss, "spans": timer.spans}
        return {"loss": loss}

    def sync_device(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)
