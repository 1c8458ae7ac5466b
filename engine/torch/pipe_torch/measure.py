"""Measurements: memory, the bytes autograd saves, the plain loop's time."""

import resource
import time

import torch

from .losses import compute_loss


class MeasureMixin:
    """The Worker's measuring commands: memory, saved and time_plain, and
    the reply to an out-of-memory error."""

    def cmd_time_plain(self, msg):
        """The benchmark's reference: a plain PyTorch training loop on this
        worker's own network, optimizer and a copy of the batch in msg,
        in this process, timed step by step (zero_grad, forward, loss,
        backward, step). The engine's own steps run in the same process,
        threads and memory, so the difference is the engine's overhead."""
        n = msg["n"]
        x, y, mask = self.batch(msg, True)
        x = x.clone()
        y = None if y is None else y.clone()
        model, opt = self.forward_model(), self.opt
        for g in opt.param_groups:
            g["lr"] = msg["lr"]

        def step():
            opt.zero_grad(set_to_none=True)
            with self.autocast():
                logits, out = model(x)
            loss = compute_loss(self.loss_kind, logits, out, y, mask, n, self.out_shape, self.ends_sigmoid)
            loss.backward()
            opt.step()

        for _ in range(msg.get("warmup", 1)):
            step()
        steps = msg["steps"]
        if self.cuda:
            # A plain loop does not wait for the GPU between steps: the
            # steps are timed together, between two synchronisations.
            torch.cuda.synchronize(self.device)
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            torch.cuda.synchronize(self.device)
            each = (time.perf_counter() - t0) * 1e3 / max(steps, 1)
            return {"ms": [each] * steps}
        ms = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            ms.append((time.perf_counter() - t0) * 1e3)
        return {"ms": ms}

    def cmd_memory(self, msg):
        res = {"max_rss_bytes": max_rss()}
        if self.model is not None and self.cuda:
            d = self.device
            torch.cuda.synchronize(d)
            free, total = torch.cuda.mem_get_info(d)
            res.update({
                "device": str(d),
                "max_allocated_bytes": torch.cuda.max_memory_allocated(d),
                "max_reserved_bytes": torch.cuda.max_memory_reserved(d),
                "allocated_bytes": torch.cuda.memory_allocated(d),
                "reserved_bytes": torch.cuda.memory_reserved(d),
                "device_used_bytes": total - free,
                "device_total_bytes": total,
            })
        if msg.get("reset") and self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        return res

    def oom_reply(self, e):
        mem = {}
        try:
            mem = self.cmd_memory({})
        except Exception:  # noqa: BLE001
            pass
        node = self.net.at[0] if getattr(self, "net", None) is not None else None
        phase = getattr(self, "phase", None) or "unknown"
        if phase not in ("forward", "evaluation"):
            node = None
        try:
            if self.cuda:
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass
        return {"ok": False, "kind": "oom", "error": str(e).split("\n")[0][:400], "node": node or "",
                "phase": phase, "memory": mem}

    def cmd_saved(self, msg):
        """One training forward pass and its loss under saved-tensor hooks:
        the bytes autograd keeps for the backward pass, each storage once,
        split into activations, parameters, buffers and autocast's copies
        of the parameters.

        The activations are also told per node: a saved storage that is a
        node's output (or a view of one) counts for the node that made it,
        the first to return it; any other (a cast copy, a mask, pooling
        indices, a norm's statistics, attention's inner tensors) for the
        node running when it was saved, and what the loss saves for the
        loss. The input batch is copied first, so that it is a storage of
        its own size rather than a view of the shared memory."""
        n = msg["n"]
        x, y, mask = self.batch(msg, True)
        x = x.clone()
        y = None if y is None else y.clone()
        mask = None if mask is None else mask.clone()
        net = self.net
        params = {storage_key(p)[0] for p in net.parameters()}
        buffers = {storage_key(b)[0] for b in net.buffers()}
        seen = {}
        owner = {}
        where = ["forward"]

        def pack(t):
            key, nbytes = storage_key(t)
            if key not in seen:
                if key in params:
                    kind = "parameters"
                elif key in buffers:
                    kind = "buffers"  # a batchnorm's running statistics
                elif is_param_cast(t):
                    kind = "parameter_casts"
                else:
                    kind = "activations"
                at = net.at[1] if where[0] == "forward" else where[0]
                seen[key] = (kind, nbytes, str(t.dtype).replace("torch.", ""), at)
            return t

        alive = []

        def record(i, t):
            # Every output is held until the end, so that no storage's
            # address is reused by a later one.
            if torch.is_tensor(t):
                alive.append(t)
                owner.setdefault(storage_key(t)[0], i)

        snap = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone()) for _, m in self.bns()]
        segments = net.segments
        net.segments = {} if msg.get("no_checkpoint") else segments
        net.record = record
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                with self.autocast():
                    logits, out = net(x)
                where[0] = "loss"
                loss = compute_loss(self.loss_kind, logits, out, y, mask, n, self.out_shape, self.ends_sigmoid)
        finally:
            net.record = None
            net.segments = segments
            for (rm, rv, nt), (_, m) in zip(snap, self.bns()):
                m.running_mean.copy_(rm)
                m.running_var.copy_(rv)
                m.num_batches_tracked.copy_(nt)
        del loss, alive
        totals = {}
        by_dtype = {}
        nodes = {}
        for key, (kind, nbytes, dt, at) in seen.items():
            totals[kind] = totals.get(kind, 0) + nbytes
            if kind != "activations":
                continue
            by_dtype[dt] = by_dtype.get(dt, 0) + nbytes
            at = owner.get(key, at)
            name = "loss" if at == "loss" else str(at)
            e = nodes.setdefault(name, {"bytes": 0, "dtypes": {}})
            e["bytes"] += nbytes
            e["dtypes"][dt] = e["dtypes"].get(dt, 0) + nbytes
        return {"bytes": totals, "activations_by_dtype": by_dtype, "nodes": nodes}


def storage_key(t):
    try:
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    except AttributeError:
        s = t.storage()
        return s.data_ptr(), s.nbytes() if hasattr(s, "nbytes") else s.size() * t.element_size()


VIEW_BACKWARDS = ("TBackward", "TransposeBackward", "PermuteBackward", "SelectBackward", "SliceBackward",
                  "ViewBackward", "UnsafeViewBackward", "ReshapeAliasBackward", "AsStridedBackward",
                  "ExpandBackward", "SqueezeBackward", "UnsqueezeBackward", "AliasBackward")


def is_param_cast(t):
    """Whether t is autocast's copy of a weight, or a view of one: its
    autograd history is a cast of a leaf, through views alone."""
    fn, cast = t.grad_fn, False
    for _ in range(8):
        if fn is None:
            return False
        name = type(fn).__name__.rstrip("0123456789")
        if name == "AccumulateGrad":
            return cast
        if name == "ToCopyBackward":
            cast = True
        elif name not in VIEW_BACKWARDS:
            return False
        nxt = [f for f, _ in fn.next_functions if f is not None]
        if len(nxt) != 1:
            return False
        fn = nxt[0]
    return False


def is_oom(e):
    """Whether e is torch running out of memory, on the device or the host."""
    cls = getattr(torch.cuda, "OutOfMemoryError", None)
    if cls is not None and isinstance(e, cls):
        return True
    msg = str(e)
    return isinstance(e, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg)


def max_rss():
    """This process's peak resident memory: VmHWM, the kernel's figure for
    its own address space. ru_maxrss is the fallback only: Linux carries
    into it, across exec, the peak of the process that started it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
