"""The worker: its command loop, the build, and the batches."""

import contextlib
import inspect
import os
import sys
import time
import traceback

import torch

from .compiled import CompileMixin, version_tuple
from .export import ExportMixin
from .gan import GANMixin
from .graphs import GraphMixin
from .measure import MeasureMixin, is_oom
from .phases import Phases, enabled as phases_enabled
from .net import Net, dead_params, make_optimizer, module_key, state_names
from .readback import Readback
from .resident import ResidentMixin
from .rendezvous import meet
from .scaler import make_scaler
from .shm import Region
from .state import StateMixin
from .train import TrainMixin
from . import protocol, rendezvous, wire
from .wire import Failure


class Worker(StateMixin, TrainMixin, GANMixin, MeasureMixin, CompileMixin, ExportMixin, GraphMixin, ResidentMixin):
    """One device's model and its commands: cmd_NAME answers the command
    NAME (the mixins hold the state, training, gan, measuring and export
    ones)."""

    def __init__(self, out):
        self.out = out
        self.regions = {}
        self.model = None
        self.step_no = 0
        self.micro = 0
        self.seed = 0
        self.pending = []  # lagged mode: [(step, [(loss tensor, n)])]
        self.current = []  # this step's micro-batch losses
        self.applied = {}
        self.gan = None  # gan mode: the discriminator and its settings (cmd_build_gan)
        self.stop_group = None  # the group agree_stop all-reduces over
        self.failed = None  # why a training command failed (training_failed)
        self.copying = None  # the event of a batch's copy to the device not yet waited for
        self.batching = False  # in train_steps: lagged losses are read at its end
        self.frozen = False  # gc.freeze has run (freeze_gc)
        self.phases = None  # the commands' phase timings, under PIPE_TORCH_PHASES=1 (phases.py)

    # -- protocol --------------------------------------------------------
    def reply(self, obj, cmd):
        """Writes the reply obj to the command cmd (wire.encode_reply),
        once the batch the command copied from the shared memory is on the
        device (to_device_registered): the reply frees its slot for pipe
        to overwrite."""
        if self.copying is not None:
            self.copying.synchronize()
            self.copying = None
        self.out.write(wire.encode_reply(obj, cmd) + "\n")
        self.out.flush()

    def serve(self, stdin):
        for line in stdin:
            line = line.strip()
            if not line:
                continue
            cmd = None
            self.phase = None
            if self.phases is not None:
                self.phases.start()
            if getattr(self, "net", None) is not None:
                self.net.at[0] = self.net.at[1] = None
            try:
                try:
                    cmd, args = wire.read_request(line)
                except ValueError as e:
                    raise Failure("error", f"unreadable command: {e}") from e
                if cmd == "quit":
                    self.reply({"ok": True}, cmd)
                    break
                fn = getattr(self, "cmd_" + cmd, None)
                if fn is None:
                    raise Failure("error", f"unknown command {cmd!r}")
                if self.failed is not None and cmd in _TRAINING:
                    raise Failure("skipped", f"not run: a training command before it failed ({self.failed})")
                res = fn(args) or {}
                res["ok"] = True
                self.reply(res, cmd)
            except Failure as e:
                self.training_failed(cmd, e)
                self.reply({"ok": False, "kind": e.kind, "error": str(e), **e.extra}, cmd)
            except Exception as e:  # noqa: BLE001 - every failure goes back to pipe
                self.training_failed(cmd, e)
                if is_oom(e):
                    self.reply(self.oom_reply(e), cmd)
                elif getattr(self, "store", None) is not None and rendezvous.peer_lost(str(e)):
                    # Another rank's death: gloo's traceback says nothing
                    # of which, the store does.
                    first = str(e).splitlines()[0]
                    left = rendezvous.who_left(self.store, self.rank, self.world)
                    self.reply({"ok": False, "kind": "error", "error": f"{left} ({first})"}, cmd)
                else:
                    self.reply({"ok": False, "kind": "error", "error": f"{type(e).__name__}: {e}",
                                "trace": traceback.format_exc(limit=8)}, cmd)
        for r in self.regions.values():
            r.close()

    def training_failed(self, cmd, e):
        """After a training command fails, the ones pipe queued behind it
        are refused (kind "skipped") until pipe, having read the failure,
        sends resume (or sets the state or builds again): pipe sends the
        next step before the last one replied (engine/torch/queue.go), and
        that step must not train on from a failed one."""
        if cmd in _TRAINING and self.failed is None and not (isinstance(e, Failure) and e.kind == "skipped"):
            self.failed = str(e).splitlines()[0][:200] if str(e) else type(e).__name__

    def cmd_resume(self, msg):
        self.failed = None

    # -- commands --------------------------------------------------------
    def cmd_hello(self, msg):
        return hello()

    def cmd_map(self, msg):
        old = self.regions.pop(msg["region"], None)
        if old is not None:
            old.close()
        self.regions[msg["region"]] = Region(msg["path"], msg["size"])

    def cmd_build(self, msg):
        self.failed = None
        spec = msg["spec"]
        if spec.get("version") != protocol.SPEC_VERSION:
            raise Failure("error", f"spec version {spec.get('version')}; this worker reads {protocol.SPEC_VERSION}")
        self.spec = spec
        cfg = spec["engine"]
        self.cfg = cfg
        self.seed = int(spec.get("seed", 0))
        self.loss_kind = spec["loss"]
        self.out_shape = spec["out_shape"]
        self.input_shape = spec["input"]
        self.lagged = cfg.get("loss_readback") == "lagged"
        threads = int(spec.get("threads") or 0)
        if threads > 0:
            torch.set_num_threads(threads)
        # The report says the threads the steps ran on, whoever set them.
        self.applied["threads"] = str(torch.get_num_threads())
        if not getattr(self, "interop_set", False):
            # Once a process: torch 1.13 aborts the process on a second
            # call (a C++ error no Python handler sees), and pipe may
            # build again in the same worker.
            self.interop_set = True
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:
                pass
        dev = cfg.get("device", "cpu")
        self.dist = cfg.get("distributed")
        if self.dist:
            if dev.startswith("cuda"):
                # Before the process group: NCCL binds each rank to the
                # current device when it starts.
                torch.cuda.set_device(torch.device(dev))
            dev = self.init_distributed(dev)
        self.device = torch.device(dev)
        self.cuda = self.device.type == "cuda"
        if self.cuda:
            torch.cuda.set_device(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        self.apply_flags()
        self.readback = Readback(self.cuda)
        self.phases = Phases(self.cuda) if phases_enabled() else None
        torch.manual_seed(self.seed)
        self.ends_sigmoid = spec["nodes"][spec["output"]]["op"] == "sigmoid"
        self.dropout = any(n["op"] == "dropout" and n["args"]["p"] > 0 for n in spec["nodes"])
        net = Net(spec)
        self.check_params(net)
        net = net.to(self.device)
        if self.dist and self.dist.get("sync_batchnorm"):
            # Before DDP wraps the net, and before its state's names are
            # read: the replacements keep BatchNorm's parameter names.
            # Imported here: the hello's torch version check comes first.
            from .syncbn import sync_batchnorm
            n = sync_batchnorm(net, self.device.type == "cuda", module_key)
            if n:
                how = "SyncBatchNorm" if self.device.type == "cuda" else "gloo all-reduce of per-channel sums"
                self.applied["sync_batchnorm"] = f"{n} layers, {how}"
        if self.cfg.get("channels_last"):
            net = net.to(memory_format=torch.channels_last)
            net.channels_last = True
            self.applied["channels_last"] = "on"
        self.net = net
        self.names = state_names(self.spec, net)
        self.dead = dead_params(spec, self.names)
        self.model = net
        if self.dist:
            from torch.nn.parallel import DistributedDataParallel as DDP
            kw = {"bucket_cap_mb": max(cfg["distributed"].get("bucket_mb", 25), 1), "broadcast_buffers": True,
                  "gradient_as_bucket_view": True}
            if self.cuda:
                kw["device_ids"] = [self.device.index]
            self.model = DDP(net, **kw)
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.get("autocast") or "")
        self.scaler = None
        if cfg.get("grad_scaler"):
            self.scaler = make_scaler(self.cuda)
            if self.scaler is None:
                raise Failure("unsupported", "fp16 with loss scaling needs a CUDA device; plan bf16 or fp32 for the CPU")
        self.compiled = None
        self.applied["compile"] = "eager"
        if cfg.get("compile"):
            self.try_compile()
        self.opt = self.make_optimizer(spec["optimizer"])
        if self.scaler is not None:
            # A fused optimizer takes the scaler's found_inf on the device;
            # any other makes scaler.step read it back, a sync a step.
            self.applied["grad_scaler"] = ("on; the fused optimizer reads found_inf on the device" if self.fused else
                                           "on; scaler.step reads found_inf back each step (a host sync): the optimizer is not fused")
        self.copy_stream = torch.cuda.Stream(self.device) if self.cuda and cfg.get("pinned") else None
        self.staged = {}
        self.events = {}
        self.net.train()
        self.graph_setup()
        params = sum(p.numel() for p in net.parameters())
        reply = {"params": params, "applied": self.applied, "device": str(self.device), "torch": torch.__version__}
        if self.dist:
            reply["world_restarts"] = self.world_restarts
        return reply

    def init_distributed(self, dev):
        import datetime
        import torch.distributed as dist
        d = self.dist
        backend = d["backend"]
        timeout = datetime.timedelta(seconds=d.get("timeout_s") or 300)  # each collective's
        kw = {}
        if dev.startswith("cuda") and "device_id" in inspect.signature(dist.init_process_group).parameters:
            kw["device_id"] = torch.device(dev)  # torch 2.3 and later: the communicator is made eagerly for it
        self.store, self.world_restarts = meet(dist, d)
        dist.init_process_group(backend=backend, store=self.store, rank=d["rank"], world_size=d["world_size"],
                                timeout=timeout, **kw)
        self.rank = d["rank"]
        self.world = d["world_size"]
        if d.get("agree_stop"):
            # Every rank makes the group, in the same order (new_group is
            # collective); NCCL's would sync the device each step.
            self.stop_group = dist.group.WORLD if backend == "gloo" else dist.new_group(backend="gloo")
        self.applied["process_group"] = f"{backend}, rank {d['rank']} of {d['world_size']}"
        return dev

    def apply_flags(self):
        cfg = self.cfg
        tf32 = bool(cfg.get("tf32"))
        if self.cuda:
            if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
                # torch 2.9 and later: mixing the allow_tf32 setters with
                # this API raises, Inductor's own use of it included.
                torch.backends.cuda.matmul.fp32_precision = "tf32" if tf32 else "ieee"
                torch.backends.cudnn.conv.fp32_precision = "tf32" if tf32 else "ieee"
            else:
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.backends.cudnn.allow_tf32 = tf32
            self.applied["tf32"] = "on" if tf32 else "off"
            bench = bool(cfg.get("cudnn_benchmark"))
            torch.backends.cudnn.benchmark = bench
            self.applied["cudnn_benchmark"] = "on" if bench else "off"
            cap = int(cfg.get("cudnn_workspace_mib") or 0)
            if cap > 0:
                # Read by cuDNN's convolutions when they pick an
                # algorithm, so it is set before the first one runs.
                os.environ["CUDNN_CONV_WSCAP_DBG"] = str(cap)
                self.applied["cudnn_workspace"] = f"at most {cap} MiB"
        if cfg.get("autocast"):
            self.applied["autocast"] = cfg["autocast"]
        if not self.cuda and os.environ.get("PIPE_TORCH_FAKE_NO_ONEDNN") == "1":
            # A test hook: every CPU conv takes PyTorch's slow path (im2col
            # columns and a GEMM), as a bf16 conv does on a CPU without
            # AVX-512; the planner reads the same variable
            # (torch.OneDNNOff) and prices that path.
            torch.backends.mkldnn.enabled = False
            self.applied["onednn"] = "off"

    def check_params(self, net):
        for n in self.spec["nodes"]:
            key = module_key(n["name"])
            got = sum(p.numel() for p in net.layers[key].parameters()) if key in net.layers else 0
            if got != n["params"]:
                raise Failure("unsupported", f"node {n['name']} ({n['op']}): torch has {got} parameters, pipe {n['params']}")

    def make_optimizer(self, o):
        opt, self.applied["optimizer"], self.fused = make_optimizer(
            o, list(self.net.parameters()), bool(self.cfg.get("fused_optimizer")) and self.cuda)
        return opt

    # -- batches -----------------------------------------------------------
    def batch(self, msg, train):
        """The batch's tensors on the device. The shared memory may be
        overwritten as soon as this returns (the reply says so), so on a
        CUDA device the values go through a pinned buffer and a copy
        stream, which lets the copy of the next batch run while this
        step's kernels do."""
        if self.phases is not None:
            t0 = time.perf_counter()
            try:
                return self.batch_parts(msg, train)
            finally:
                self.phases.copy += time.perf_counter() - t0
        return self.batch_parts(msg, train)

    def batch_parts(self, msg, train):
        n = msg["n"]
        if msg.get("rows") is not None:
            x, y, mask = self.gather(msg["rows"])
            return self.lay_out(x, n), y, mask
        region = self.regions["in"]
        parts = []
        for key in ("x", "y", "mask"):
            ref = msg.get(key)
            parts.append(None if ref is None else region.floats(ref[0], ref[1]))
        if not self.cuda:
            # The CPU computes on the shared memory itself: pipe writes the
            # next batch into another slot, and reuses this one only after
            # this command's reply, when nothing here reads it any more.
            pass
        elif self.copy_stream is not None and region.pin():
            parts = self.to_device_registered(parts)
        elif self.copy_stream is not None:
            parts = self.to_device_pinned(parts, train)
        else:
            parts = [None if p is None else p.to(self.device) for p in parts]
        x, y, mask = parts
        return self.lay_out(x, n), y, mask

    def lay_out(self, x, n):
        x = x.reshape([n] + list(self.input_shape))
        if self.net.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        return x

    def to_device_registered(self, parts):
        """The batch copied straight from the shared memory, which is
        registered as page-locked: one host copy a batch (pipe's into the
        shared memory). The copy runs on the copy stream while the device
        computes the step before, and while this command queues its own
        kernels (which wait for it on the device); the host waits for it
        only before the reply, which frees the slot for pipe to
        overwrite."""
        cur = torch.cuda.current_stream(self.device)
        out = []
        with torch.cuda.stream(self.copy_stream):
            for p in parts:
                out.append(None if p is None else p.to(self.device, non_blocking=True))
            e = torch.cuda.Event()
            e.record(self.copy_stream)
        cur.wait_event(e)
        for d in out:
            if d is not None:
                d.record_stream(cur)
        self.copying = e
        return out

    def to_device_pinned(self, parts, train):
        slot = "train" if train else "eval"
        out = []
        cur = torch.cuda.current_stream(self.device)
        turn = self.flip(slot)
        for i, p in enumerate(parts):
            if p is None:
                out.append(None)
                continue
            key = (slot, i, turn)
            ev = self.events.get(key)
            if ev is not None:
                ev.synchronize()  # the copy that last used this buffer is done
            buf = self.staged.get(key)
            if buf is None or buf.numel() < p.numel():
                buf = torch.empty(max(p.numel(), 1), dtype=torch.float32, pin_memory=True)
                self.staged[key] = buf
            host = buf[:p.numel()]
            host.copy_(p)
            with torch.cuda.stream(self.copy_stream):
                d = host.to(self.device, non_blocking=True)
                e = torch.cuda.Event()
                e.record(self.copy_stream)
            self.events[key] = e
            cur.wait_event(e)
            d.record_stream(cur)
            out.append(d)
        return out

    def flip(self, slot):
        # Two pinned buffers a slot, used in turn.
        k = "_flip_" + slot
        v = getattr(self, k, 0)
        setattr(self, k, 1 - v)
        return v

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def seed_dropout(self):
        """Dropout's masks are keyed by (seed, micro-batch, rank), so a
        resumed run draws the masks the uninterrupted run would have."""
        rank = self.dist["rank"] if self.dist else 0
        s = (self.seed * 1000003 + self.micro * 8191 + rank * 131071 + 1) % (2 ** 63 - 1)
        torch.manual_seed(s)

    def forward_model(self):
        return self.compiled if self.compiled is not None else self.model

    def sync_device(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)


# The commands of a training step, which pipe queues ahead of replies.
_TRAINING = frozenset(("train", "step", "flush", "train_steps"))


def hello():
    """The worker's first message: what its Python and torch are and can do."""
    info = {"protocol": protocol.PROTOCOL, "python": sys.version.split()[0], "executable": sys.executable,
            "torch": torch.__version__, "cuda": bool(torch.cuda.is_available()),
            "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0,
            "cuda_version": getattr(torch.version, "cuda", None) or "",
            "compile": hasattr(torch, "compile") and version_tuple(torch.__version__) >= (2, 0, 0),
            "distributed": bool(torch.distributed.is_available()),
            "gloo": bool(torch.distributed.is_available() and torch.distributed.is_gloo_available()),
            "nccl": bool(torch.distributed.is_available() and torch.distributed.is_nccl_available()),
            "cpu_bf16_autocast": hasattr(torch, "autocast"),
            "threads": torch.get_num_threads()}
    if info["cuda"]:
        names = []
        for i in range(info["cuda_devices"]):
            p = torch.cuda.get_device_properties(i)
            names.append({"name": p.name, "memory": p.total_memory,
                          "capability": f"{p.major}.{p.minor}",
                          "bf16": bool(p.major >= 8)})
        info["gpus"] = names
    return info
