#!/usr/bin/python3
"""vit_fashion_torch.py: examples/vit_fashion.pipe written in plain PyTorch.

The same network (4x4 patches to 64 features, a class token, a learned
position embedding, four pre-norm encoder layers of 4-head attention and a
128-wide gelu MLP, a final layernorm, token 0, a 10-way head), the same
data (Fashion-MNIST scaled to [0, 1], 95% of the training images for
training, the 10,000 test images for the accuracy), the same optimizer
(AdamW, lr 1e-3, weight decay 0.01, cosine to 0 per step over 5 epochs of
batch 128) and 2 threads, so that its test accuracy and step time can be
set beside pipe's (bench/vit_fashion.sh runs both in one go):

    /usr/bin/python3 bench/vit_fashion_torch.py [--epochs 5] [--threads 2]

prints one JSON line per epoch: the test accuracy after it, the training
seconds so far, the steps and the milliseconds per step (the training
loop's wall time over its steps, data included, as pipe's report counts
them; the test evaluation is outside it).
"""

import argparse
import gzip
import json
import math
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    _, _, _, dims = struct.unpack(">BBBB", data[:4])
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    t = torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8)
    return t.reshape(shape)


class Block(nn.Module):
    def __init__(self, d, heads, mlp):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, mlp), nn.GELU(), nn.Linear(mlp, d))

    def forward(self, x):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class ViT(nn.Module):
    def __init__(self, patch=4, d=64, depth=4, heads=4, mlp=128, classes=10, tokens=49):
        super().__init__()
        self.proj = nn.Conv2d(1, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.empty(1, tokens + 1, d).normal_(std=0.02))
        self.blocks = nn.Sequential(*[Block(d, heads, mlp) for _ in range(depth)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.ln(self.blocks(x))[:, 0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default="data/fashion-mnist")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    x = read_idx(f"{a.data}/train-images-idx3-ubyte.gz").float().div_(255).unsqueeze(1)
    y = read_idx(f"{a.data}/train-labels-idx1-ubyte.gz").long()
    xt = read_idx(f"{a.data}/t10k-images-idx3-ubyte.gz").float().div_(255).unsqueeze(1)
    yt = read_idx(f"{a.data}/t10k-labels-idx1-ubyte.gz").long()
    perm = torch.randperm(len(x))
    ntrain = int(0.95 * len(x))
    x, y = x[perm[:ntrain]], y[perm[:ntrain]]
    model = ViT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    steps_per_epoch = math.ceil(ntrain / a.batch)
    total = steps_per_epoch * a.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    train_s, steps = 0.0, 0
    for epoch in range(a.epochs):
        model.train()
        order = torch.randperm(ntrain)
        t0 = time.perf_counter()
        for i in range(steps_per_epoch):
            idx = order[i * a.batch:(i + 1) * a.batch]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            sched.step()
            steps += 1
        train_s += time.perf_counter() - t0
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(xt), 500):
                correct += (model(xt[i:i + 500]).argmax(1) == yt[i:i + 500]).sum().item()
        print(json.dumps({"engine": "pytorch", "torch": torch.__version__, "threads": a.threads, "epoch": epoch + 1,
                          "steps": steps, "train_seconds": round(train_s, 2), "ms_per_step": round(1000 * train_s / steps, 1),
                          "params": sum(p.numel() for p in model.parameters()),
                          "last_loss": round(loss.item(), 4), "test_accuracy": correct / len(xt)}), flush=True)

if __name__ == "__main__":
    main()
