"""pipe's losses, masks included, as the native engine computes them
(engine/native/loss.go), and a gan's adversarial loss (run/gan_loss.go)."""

import torch
import torch.nn.functional as F

from .wire import Failure


def ce_targets(y, n, out_shape):
    """Class indices when there is one value per output position."""
    positions = 1
    for d in out_shape[1:]:
        positions *= d
    return y.numel() == n * positions and out_shape[0] > 1


def compute_loss(kind, logits, out, y, mask, n, out_shape, ends_sigmoid=False):
    """The mean loss over the batch's valid positions, in fp32."""
    logits = logits.float()
    if kind == "cross_entropy":
        k = out_shape[0]
        if ce_targets(y, n, out_shape):
            t = y.reshape([n] + list(out_shape[1:]))
            w = None if mask is None else mask.reshape(t.shape)
            idx = t.long()
            if w is not None:
                idx = torch.where(w > 0, idx, torch.zeros_like(idx))
            per = F.cross_entropy(logits, idx, reduction="none")
        else:
            t = y.reshape([n] + list(out_shape))
            per = -(t * F.log_softmax(logits, dim=1)).sum(1)
            w = None
            if mask is not None:
                w = mask.reshape([n] + list(out_shape)).select(1, 0)
        if w is None:
            return per.mean()
        den = w.sum()
        return torch.where(den > 0, (per * w).sum() / den.clamp_min(1e-30), per.sum() * 0)
    t = y.reshape([n] + list(out_shape))
    w = None if mask is None else mask.reshape(t.shape)
    if kind == "dice":
        # A model that ends in sigmoid hands dice its probabilities; any
        # other hands it logits, which dice passes through a sigmoid.
        p = out.float() if ends_sigmoid else torch.sigmoid(logits)
        dims = [0] + list(range(2, p.dim()))
        if w is None:
            s0, s1, s2 = (p * t).sum(dims), p.sum(dims), t.sum(dims)
        else:
            s0, s1, s2 = (w * p * t).sum(dims), (w * p).sum(dims), (w * t).sum(dims)
        return 1 - ((2 * s0 + 1) / (s1 + s2 + 1)).mean()
    if kind == "bce":
        per = F.binary_cross_entropy_with_logits(logits, t, reduction="none")
    elif kind == "mse":
        per = (logits - t) ** 2
    elif kind == "mae":
        per = (logits - t).abs()
    else:
        raise Failure("unsupported", f"loss {kind} is not built here")
    if w is None:
        return per.mean()
    den = w.sum()
    return torch.where(den > 0, (per * w).sum() / den.clamp_min(1e-30), per.sum() * 0)


def masked_count(kind, y, mask, n, out_shape):
    """The count a masked loss divides its sum by (compute_loss's den), as
    an fp32 tensor; None for an unmasked loss (a plain mean, whose count is
    the batch's) and for dice, which is no mean over positions."""
    if mask is None or kind == "dice":
        return None
    if kind == "cross_entropy" and not ce_targets(y, n, out_shape):
        return mask.reshape([n] + list(out_shape)).select(1, 0).float().sum()
    return mask.float().sum()


def gan_loss(kind, role, z):
    """run's advLoss: a gan's adversarial loss of role (real, fake or gen)
    on a discriminator's logits z, the mean over every value."""
    z = z.float()
    if kind == "lsgan":
        return ((z - (0.0 if role == "fake" else 1.0)) ** 2).mean()
    if kind == "hinge":
        if role == "real":
            return F.relu(1 - z).mean()
        if role == "fake":
            return F.relu(1 + z).mean()
        return -z.mean()
    return F.softplus(z if role == "fake" else -z).mean()
