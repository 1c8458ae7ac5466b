"""Batchnorm whose batch statistics are every rank's (the plan's
sync_batchnorm). On CUDA it is torch's SyncBatchNorm; on the CPU, whose
tensors torch's SyncBatchNorm refuses (1.13 and 2.x alike), this module's
own: the per-channel sums, sums of squares and the count are all-reduced
over gloo in one call, and their gradients the same way in the backward
pass."""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class _AllReduceSum(torch.autograd.Function):
    """t summed over the group's ranks. Every rank's loss reads the sum, so
    the gradient of the sum is every rank's gradient summed likewise (DDP
    then averages the parameters' gradients, as for the rest)."""

    @staticmethod
    def forward(ctx, t, group):
        ctx.group = group
        t = t.clone()
        dist.all_reduce(t, group=group)
        return t

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous().clone()
        dist.all_reduce(g, group=ctx.group)
        return g, None


class GlooSyncBatchNorm(nn.modules.batchnorm._BatchNorm):
    """A batchnorm of any rank (N, C, ...) that normalises over the samples
    of every rank of group in training, as one BatchNorm would over the
    ranks' batches together; its running statistics move as BatchNorm's
    do (the unbiased variance over all the samples)."""

    def __init__(self, bn, group=None):
        super().__init__(bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats)
        self.load_state_dict(bn.state_dict())
        self.group = group

    def _check_input_dim(self, x):
        if x.dim() < 2:
            raise ValueError(f"expected at least 2-D input, got {x.dim()}-D")

    def forward(self, x):
        return self.sync_forward(x, True)

    def sync_forward(self, x, update):
        """update=False normalises alike without moving the running
        statistics (a recomputed checkpoint segment)."""
        if not self.training:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)
        c = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        xf = x.float()
        stats = torch.cat([xf.sum(dims), (xf * xf).sum(dims), xf.new_full((1,), float(x.numel() // c))])
        stats = _AllReduceSum.apply(stats, self.group)
        total = stats[2 * c]
        mean = stats[:c] / total
        var = (stats[c:2 * c] / total - mean * mean).clamp_min(0)
        if update and self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                mom = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                n = float(total)
                unbiased = var * (n / (n - 1)) if n > 1 else var
                self.running_mean.mul_(1 - mom).add_(mean.detach(), alpha=mom)
                self.running_var.mul_(1 - mom).add_(unbiased.detach(), alpha=mom)
        shape = [1, c] + [1] * (x.dim() - 2)
        y = (xf - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y.to(x.dtype)


class CudaSyncBatchNorm(nn.SyncBatchNorm):
    """torch's SyncBatchNorm, with sync_forward as GlooSyncBatchNorm's."""

    def sync_forward(self, x, update):
        if update:
            return self(x)
        # Momentum 0 keeps the running statistics (running·1 + batch·0).
        mom, tracked = self.momentum, self.num_batches_tracked.clone()
        self.momentum = 0.0
        try:
            return self(x)
        finally:
            self.momentum = mom
            self.num_batches_tracked.copy_(tracked)


def sync_batchnorm(net, cuda, module_key):
    """Replaces every batchnorm node's module of net with one that syncs
    its statistics over the default process group; the number replaced."""
    count = 0
    for n in net.nodes:
        if n["op"] != "batchnorm":
            continue
        key = module_key(n["name"])
        bn = net.layers[key]
        if cuda:
            new = CudaSyncBatchNorm(bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats)
            new.load_state_dict(bn.state_dict())
        else:
            new = GlooSyncBatchNorm(bn)
        new = new.to(bn.weight.device if bn.weight is not None else bn.running_mean.device)
        new.train(bn.training)
        net.layers[key] = new
        net.mods[n["id"]] = new
        count += 1
    return count
