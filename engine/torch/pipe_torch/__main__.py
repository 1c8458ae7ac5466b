"""The worker's entry: python -m pipe_torch --worker."""

import os
import signal
import sys

from . import wire


def main():
    # The protocol's stream is the original stdout; stdout itself now goes
    # to stderr, so nothing a library prints can break the protocol.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    out = os.fdopen(out_fd, "w", buffering=1)
    sys.stdout = sys.stderr
    # Ctrl-C goes to pipe, which finishes the step and asks for a checkpoint.
    # So do SLURM's signals, which reach every process of a job step, this
    # one too: SIGUSR1 ahead of the time limit (sbatch --signal) and SIGTERM
    # on a preemption. pipe stops the worker itself, and the kernel kills it
    # when pipe dies (Pdeathsig).
    for sig in (signal.SIGINT, signal.SIGUSR1, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    try:
        import torch  # noqa: F401
        import torch.nn  # noqa: F401
        import torch.nn.functional  # noqa: F401
    except Exception as e:  # noqa: BLE001
        out.write(wire.encode_reply({"ok": False, "kind": "no-torch", "error": f"{type(e).__name__}: {e}",
                                     "executable": sys.executable, "python": sys.version.split()[0]}, None) + "\n")
        out.flush()
        return 3
    from .worker import Worker, hello
    w = Worker(out)
    w.reply({"ok": True, **hello()}, "hello")
    w.serve(sys.stdin)
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        sys.exit(main())
    from . import __doc__ as doc
    print(doc)
