"""pipe_torch: the worker of pipe's torch engine.

pipe (engine/torch) embeds this package and starts one worker per device:

    PYTHON -m pipe_torch --worker

The worker builds a torch.nn.Module from pipe's model graph (the spec that
engine/torch writes), receives pipe's seeded initial weights, and trains,
evaluates, reports memory and exports TorchScript on pipe's command. pipe
keeps the plan, the data, the run loop, the checkpoints and the reports;
the worker computes. The commands and their replies are
engine/torch/protocol.go's structs.

Its modules, one concern each:

    __main__    the entry: the protocol's stream, torch's import, the hello
    protocol    the wire's structs and versions, generated from protocol.go
    wire        reading requests and writing replies against protocol
    worker      the command loop, the build and the batches
    rendezvous  meeting the other ranks, naming those that never come
    state       loading and saving the state through shared memory
    train       micro-batches, the optimizer step, evaluation
    readback    the loss read back without waiting for the step queued
    phases      where a training command's time goes (PIPE_TORCH_PHASES)
    scaler      fp16's loss scaling (GradScaler, or a stand-in for tests)
    gan         a gan's discriminator beside the model
    measure     memory, the bytes autograd saves, the plain loop's time
    net         the network of a spec, its optimizer, its state's names
    compiled    torch.compile, and the fall back to eager when it fails
    graphs      one CUDA graph a step, captured and replayed, or why not
    resident    the training set kept on the device, batches by index
    modules     the torch.nn modules of pipe's own ops
    syncbn      batchnorm over every rank's batch (sync_batchnorm)
    losses      pipe's losses
    timer       per-node timings (pipe run --profile)
    export      TorchScript export (pipe export --torchscript)
    shm         the shared-memory regions

Nothing here needs more than torch (1.13 or later) and the standard
library. What only torch 2.x has (torch.compile, fused AdamW) is guarded.
Importing the package imports no torch; setup() does.
"""

torch = None
Net = None
make_optimizer = None
module_key = None
state_names = None
compute_loss = None


def setup():
    """Imports torch and the network's modules, and binds the names other
    scripts use (the benchmark's plain PyTorch loop: torch, Net,
    make_optimizer, module_key, state_names, compute_loss)."""
    global torch, Net, make_optimizer, module_key, state_names, compute_loss
    if Net is not None:
        return
    import torch as _torch

    from . import losses, net
    torch = _torch
    Net, make_optimizer, module_key, state_names = net.Net, net.make_optimizer, net.module_key, net.state_names
    compute_loss = losses.compute_loss
