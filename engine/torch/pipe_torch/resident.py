"""A training set kept on the device (protocol.go's residentRequest): the
samples' bytes, their labels and the loader's table of 256 inputs, sent
once; a training batch is then its samples' indices, gathered here."""

import torch

from .shm import Region


class ResidentMixin:
    """The Worker's resident command and its gather."""

    resident = None  # (samples [N, per] uint8, labels [N] uint8, table [256] float32)

    def cmd_resident(self, msg):
        region = Region(msg["path"], msg["size"])
        try:
            n, per = msg["n"], msg["per"]
            raw = torch.frombuffer(region.mm, dtype=torch.uint8)
            x = raw[msg["x_off"]:msg["x_off"] + n * per].view(n, per).to(self.device, copy=True)
            y = raw[msg["y_off"]:msg["y_off"] + n].to(self.device, copy=True)
            lut = raw[msg["lut_off"]:msg["lut_off"] + 1024].view(torch.float32).to(self.device, copy=True)
            del raw  # the mapping closes only once no tensor views it
        finally:
            region.close()
        self.resident = (x, y, lut)
        self.gathered = {}

    def gather(self, rows):
        """The batch of the samples at rows: their bytes gathered into a
        static buffer, each looked up in the loader's table (so the inputs
        are the loader's float32 values bit for bit, in device memory), and
        their labels as float32, as the loader gives them. The buffers are
        kept per batch size; a step's reads of them are queued before the
        next step's gather on the same stream."""
        if self.resident is None:
            raise RuntimeError("a batch of indices, and no training set on the device")
        x, y, lut = self.resident
        n = len(rows)
        bufs = self.gathered.get(n)
        if bufs is None:
            if len(self.gathered) >= 4:
                self.gathered.clear()
            bufs = self.gathered[n] = (torch.empty((n, x.shape[1]), dtype=torch.uint8, device=self.device),
                                       torch.empty((n * x.shape[1],), dtype=torch.float32, device=self.device),
                                       torch.empty((n,), dtype=torch.uint8, device=self.device),
                                       torch.empty((n,), dtype=torch.float32, device=self.device))
        gx, fx, gy, fy = bufs
        idx = torch.tensor(rows, dtype=torch.long).to(self.device, non_blocking=True)
        torch.index_select(x, 0, idx, out=gx)
        torch.index_select(lut, 0, gx.view(-1).long(), out=fx)
        torch.index_select(y, 0, idx, out=gy)
        fy.copy_(gy)
        return fx, fy, None
