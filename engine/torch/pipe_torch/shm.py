"""The shared-memory regions pipe creates and the worker maps."""

import mmap
import os

import torch


class Region:
    """A shared-memory file pipe created, mapped here."""

    def __init__(self, path, size):
        fd = os.open(path, os.O_RDWR)
        try:
            self.mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.size = size

    def floats(self, off, count):
        """count float32 values from byte offset off, without a copy."""
        if count == 0:
            return torch.empty(0)
        return torch.frombuffer(self.mm, dtype=torch.float32, count=count, offset=off)

    def close(self):
        try:
            self.mm.close()
        except BufferError:
            pass  # a tensor still views it; the process is ending
