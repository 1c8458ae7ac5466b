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
        self.views = {}

    def floats(self, off, count):
        """count float32 values from byte offset off, without a copy. The
        views are kept: a batch's slots and sizes repeat every step."""
        if count == 0:
            return torch.empty(0)
        key = (off, count)
        t = self.views.get(key)
        if t is None:
            if len(self.views) >= 64:  # sizes that changed: start again
                self.views.clear()
            t = self.views[key] = torch.frombuffer(self.mm, dtype=torch.float32, count=count, offset=off)
        return t

    pinned = None  # the address registered with CUDA, once pin() succeeds

    def pin(self):
        """Registers the mapping as page-locked memory with CUDA, so that
        copies to the device read it directly (no copy into a pinned
        buffer first). False, changing nothing, where CUDA refuses."""
        if self.pinned is not None:
            return True
        try:
            ptr = torch.frombuffer(self.mm, dtype=torch.uint8).data_ptr()
            rt = torch.cuda.cudart()
            if int(rt.cudaHostRegister(ptr, self.size, 0)) != 0:
                return False
        except Exception:  # noqa: BLE001 - an older torch or a refusing driver: copy through a buffer
            return False
        self.pinned = ptr
        return True

    def close(self):
        self.views.clear()
        if self.pinned is not None:
            try:
                torch.cuda.cudart().cudaHostUnregister(self.pinned)
            except Exception:  # noqa: BLE001 - the mapping goes anyway
                pass
            self.pinned = None
        try:
            self.mm.close()
        except BufferError:
            pass  # a tensor still views it; the process is ending
