"""A gan's discriminator, trained beside the model."""

import contextlib
import math

import torch

from .losses import compute_loss, gan_loss
from .net import Net, dead_params, state_names, zero_dead
from .protocol import GAN_PREFIX
from .wire import Failure


class GANMixin:
    """The Worker's gan mode. The discriminator D lives beside the
    generator (the model built by cmd_build) with its own optimizer;
    swap() exchanges the attributes that say which model the state
    commands and the optimizer step work on. Each train command is one
    micro-batch as run's ganModel trains it: G forward; D's gradient from
    half its loss on the targets and half on G's output (detached); then D
    once more on G's output for G's term, D's parameters frozen, and on a
    step where G trains (every d_steps-th) G's gradient from adversarial
    weight x that term plus l1 x the L1 distance. The step steps D, then G
    when it trained."""

    GAN_SWAP = ("net", "model", "names", "dead", "opt", "spec", "step_no", "micro", "seed", "fused", "compiled",
                "dropout", "loss_kind", "out_shape", "input_shape", "ends_sigmoid")

    def swap(self):
        g = self.gan
        for k in self.GAN_SWAP:
            v = getattr(self, k)
            setattr(self, k, g[k])
            g[k] = v

    def cmd_build_gan(self, msg):
        if self.dist:
            raise Failure("unsupported", "gan mode trains on one device: plan it without data parallelism")
        if self.scaler is not None:
            raise Failure("unsupported", "gan mode with fp16 loss scaling is not built; plan bf16 or fp32")
        spec, st = msg["spec"], msg["gan"]
        net = Net(spec).to(self.device)
        net.train()
        names = state_names(spec, net)
        g = {"net": net, "model": net, "names": names, "dead": dead_params(spec, names), "opt": None, "spec": spec,
             "step_no": 0, "micro": 0, "seed": int(spec.get("seed", 0)), "fused": False, "compiled": None,
             "dropout": any(n["op"] == "dropout" and n["args"]["p"] > 0 for n in spec["nodes"]),
             "loss_kind": spec["loss"], "out_shape": spec["out_shape"], "input_shape": spec["input"],
             "ends_sigmoid": False, "conditional": bool(st["conditional"]), "adversarial": st["adversarial"],
             "adv_weight": float(st["adversarial_weight"]), "l1": float(st["l1"]),
             "d_steps": max(int(st["d_steps"]), 1), "ratio": float(st["lr_ratio"]), "steps": 0, "trained": False}
        self.gan = g
        applied = self.applied.get("optimizer")
        self.swap()
        try:
            self.check_params(net)
            self.opt = self.make_optimizer(spec["optimizer"])
        finally:
            self.swap()
            self.applied["optimizer"] = applied
        return {"params": sum(p.numel() for p in net.parameters())}

    def gan_train(self, msg):
        g = self.gan
        n, scale = msg["n"], msg["scale"]
        x, y, mask = self.batch(msg, True)
        if msg.get("zero"):
            self.opt.zero_grad(set_to_none=True)
            g["opt"].zero_grad(set_to_none=True)
            self.current = []
        trains = g["steps"] % g["d_steps"] == 0
        snap = None
        if not trains:  # G's running statistics move only when it trains, as on the native engine
            snap = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone()) for _, m in self.bns()]
        if self.dropout:
            self.seed_dropout()
        self.phase = "forward"
        with self.autocast():
            logits, out = self.forward_model()(x)
        if snap is not None:
            with torch.no_grad():
                for (rm, rv, nt), (_, m) in zip(snap, self.bns()):
                    m.running_mean.copy_(rm)
                    m.running_var.copy_(rv)
                    m.num_batches_tracked.copy_(nt)
        d, kind = g["net"], g["adversarial"]
        real = y.reshape([n] + list(self.out_shape))

        def disc(img):
            if g["conditional"]:
                img = torch.cat([x.to(img.dtype), img], 1)
            with self.autocast():
                return d(img)[0]

        self.phase = "backward"
        lr_ = gan_loss(kind, "real", disc(real))
        lf = gan_loss(kind, "fake", disc(out.detach()))
        ((0.5 * lr_ + 0.5 * lf) * scale).backward()
        for p in d.parameters():
            p.requires_grad_(False)
        try:
            with contextlib.nullcontext() if trains else torch.no_grad():
                adv = gan_loss(kind, "gen", disc(out))
                l1 = compute_loss("mae", logits, out, y, mask, n, self.out_shape)
                total = g["adv_weight"] * adv + g["l1"] * l1
                if trains:
                    (total * scale).backward()
        finally:
            for p in d.parameters():
                p.requires_grad_(True)
        zero_dead(self.dead)
        zero_dead(g["dead"])
        self.phase = None
        g["micro"] += 3
        if trains:
            self.micro += 1
            g["trained"] = True
        if self.lagged:
            self.current.append((self.readback.stash(total), n))
            res = {}
        else:
            v = total.item()
            if not math.isfinite(v):
                raise self.nonfinite(v, x)
            res = {"loss": v, "gan": [0.5 * (lr_.item() + lf.item()), adv.item(), l1.item()]}
        step = msg.get("step")
        if step is not None:
            res.update(self.cmd_step(step))
        return res

    def gan_step(self, msg):
        """D's optimizer step; whether G steps too."""
        g = self.gan
        for pg in g["opt"].param_groups:
            pg["lr"] = msg["lr"] * g["ratio"]
        self.phase = "optimizer"
        g["opt"].step()
        self.phase = None
        g["step_no"] += 1
        g["steps"] += 1
        trained, g["trained"] = g["trained"], False
        return trained

    def skip_step(self):
        """A step in which G did not train: the losses move on as cmd_step's do."""
        if not self.lagged:
            return {}
        done = self.pending
        self.pending = [(self.step_no + 1, self.current)]
        self.current = []
        return {"done": self.read_losses(done)}

    def split_gan(self, layout, counters):
        p = GAN_PREFIX
        dl = [dict(e, name=e["name"][len(p):]) for e in layout if e["name"].startswith(p)]
        gl = [e for e in layout if not e["name"].startswith(p)]
        dc = {k[len(p):]: v for k, v in counters.items() if k.startswith(p)}
        return gl, dl, dc

    def gan_set_state(self, msg):
        gl, dl, dc = self.split_gan(msg["layout"], msg.get("counters") or {})
        self.swap()
        try:
            self.set_state(dl, dc)
        finally:
            self.swap()
        self.set_state(gl, msg["counters"])
        self.gan["steps"] = int(msg["counters"].get("gan.step", 0))
        self.gan["trained"] = False

    def gan_get_state(self, msg):
        gl, dl, _ = self.split_gan(msg["layout"], {})
        self.swap()
        try:
            dc = self.get_state(dl)["counters"]
        finally:
            self.swap()
        c = self.get_state(gl)["counters"]
        for k, v in dc.items():
            c[GAN_PREFIX + k] = v
        c["gan.step"] = self.gan["steps"]
        return {"counters": c}
