#!/usr/bin/env bash
# make gpu-smoke: the torch engine's end-to-end check on one GPU, in at
# most SMOKE_SECONDS (default 420), from what make gpu-bundle builds (no Go
# or GDAL needed): bin/pipe-static, bin/gpucheck, examples/, bench/gpu/.
# Each step has its own time limit inside the budget, so one that hangs
# costs its limit and no more; the first ones are the ones kept by a cut:
#   1. the machine (df -h /dev/shm, nproc, nvidia-smi) and the environment:
#      torch, CUDA, a C compiler and Python.h (Triton builds its launcher
#      with them), one compiled toy step;
#   2. ResNet-50 224x224 bf16: pipe (gpucheck, SMOKE_RESNET_STEPS=40) against
#      torchvision's model in a plain loop, eager and under torch.compile
#      (resnet50_plain.py), with step 1's and the steady steps' peaks and
#      torch.cuda.memory_stats;
#   3. the host-to-device path the worker takes (h2d.json): pipe_torch's own
#      Region.pin on a region where pipe makes them, and the copy rates;
#   4. four examples through gpucheck, the workers' logs kept (TORCH_LOGS=
#      graph_breaks,recompiles); pipe's MLP network against the same MLP
#      written by hand, eager and compiled, in one process (mlp_split.py);
#   5. a fresh run of bench/gpu/smoke.pipe (SMOKE_STEPS=10 steps), a --resume
#      of it for 10 more, and, if time is left, a run with `checkpoint all`.
# The work folder is the first argument (default out/gpu-smoke). Whatever
# happens, it ends packed into ONE file, SMOKE_PACK_DIR/gpu-smoke.tar.gz
# (default out/gpu-smoke-pack): after every step without Inductor's cache,
# and on exit (a failure, a timeout, a signal) with the report
# (smoke_json.py) and Inductor's cache when the pack stays under
# SMOKE_PACK_MAX_MB (15). SMOKE_CACHE_FROM=an earlier pack warms Inductor's cache.
# With no GPU it says so and exits 2, writing nothing. SMOKE_DEVICE=cpu runs
# the same steps on the CPU to check the script (make gpu-smoke-dry).
set -u
PY=${PY:-python3}
O=${1:-out/gpu-smoke}
PACKDIR=${SMOKE_PACK_DIR:-out/gpu-smoke-pack}
DEV=${SMOKE_DEVICE:-cuda:0}
BUDGET=${SMOKE_SECONDS:-420}
STEPS=${SMOKE_STEPS:-10}
# gpucheck times its steps after 5 warm-up ones: the first H100 runs
# showed 15 timed steps moving a plain loop's samples/s by 1.6x between
# runs, so it takes more; a step is milliseconds beside the compile.
CHECK_STEPS=${SMOKE_CHECK_STEPS:-80}
CW=${SMOKE_WARMUP:-5}
RB=${SMOKE_RESNET_BATCH:-256}
RS=${SMOKE_RESNET_STEPS:-40}
PS=${SMOKE_PLAIN_STEPS:-25}
PW=${SMOKE_PLAIN_WARMUP:-5}
MS=${SMOKE_MLP_STEPS:-200}
EXAMPLES=${SMOKE_EXAMPLES:-examples/fashion_mlp.pipe examples/fashion.pipe examples/vit_fashion.pipe examples/volume_unet.pipe}
PACK_MAX_MB=${SMOKE_PACK_MAX_MB:-15}
# Seconds kept back from the budget for the report and the pack.
RESERVE=20
export PIPE_PYTHON=$PY
for f in bin/pipe-static bin/gpucheck bench/gpu/smoke_json.py bench/gpu/resnet50_plain.py bench/gpu/mlp_split.py; do
  [ -e "$f" ] || { echo "gpu-smoke: $f is missing; run make gpu-bundle where Go is and bring bin/ along" >&2; exit 1; }
done
if [ "$DEV" != cpu ] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu-smoke: no GPU here (nvidia-smi is absent or lists none); nothing was checked" >&2
  exit 2
fi
mkdir -p "$O" "$PACKDIR" || exit 1
# An earlier smoke's outputs go; its Inductor cache stays, to warm this one.
rm -rf "$O/ck" "$O/ck2" "$O/worker" "$O"/*.log "$O"/*.json "$O"/*.txt "$O"/*.tsv "$O"/*.pipe
: > "$O/steps.tsv"
PACK=$PACKDIR/gpu-smoke.tar.gz
export TORCHINDUCTOR_CACHE_DIR=$PWD/$O/inductor-cache TRITON_CACHE_DIR=$PWD/$O/inductor-cache/triton
case $O in /*) export TORCHINDUCTOR_CACHE_DIR=$O/inductor-cache TRITON_CACHE_DIR=$O/inductor-cache/triton ;; esac
if [ -n "${SMOKE_CACHE_FROM:-}" ]; then
  # The cache of an earlier pack (its gpu-smoke/inductor-cache).
  tar -xzf "$SMOKE_CACHE_FROM" -C "$O" --strip-components=1 gpu-smoke/inductor-cache 2>/dev/null &&
    echo "gpu-smoke: Inductor's cache warmed from $SMOKE_CACHE_FROM" || echo "gpu-smoke: $SMOKE_CACHE_FROM holds no Inductor cache"
fi

# pack [cache]: the work folder into $PACK (members under gpu-smoke/),
# written beside it and renamed, so the pack is always whole. Checkpoints
# and the worker's package (it is in the tree) stay out; Inductor's cache
# goes in only with "cache", and only while the pack fits PACK_MAX_MB.
pack() {
  local tmp=$PACKDIR/.gpu-smoke.tar.gz.tmp ex=(--exclude=./ck --exclude=./ck2 --exclude=./worker/pipe_torch)
  if [ "${1:-}" = cache ] && [ -d "$O/inductor-cache" ]; then
    rm -f "$O/inductor-cache.txt"
    tar -czf "$tmp" -C "$O" --transform 's,^\.,gpu-smoke,' "${ex[@]}" . 2>/dev/null
    if [ "$(stat -c %s "$tmp" 2>/dev/null || echo 0)" -le $((PACK_MAX_MB << 20)) ]; then
      mv -f "$tmp" "$PACK"; return
    fi
    echo "Inductor's cache left out: the pack with it is $(($(stat -c %s "$tmp") >> 20)) MiB, over SMOKE_PACK_MAX_MB=$PACK_MAX_MB" > "$O/inductor-cache.txt"
  fi
  tar -czf "$tmp" -C "$O" --transform 's,^\.,gpu-smoke,' "${ex[@]}" --exclude=./inductor-cache . 2>/dev/null && mv -f "$tmp" "$PACK"
}

# finish runs on every exit: the report from whatever exists, then the pack.
finish() {
  local rc=$?
  trap - EXIT
  if [ ! -e "$O/smoke.json" ]; then
    timeout -k 5 30 "$PY" bench/gpu/smoke_json.py "$O" "$DEST" > "$O/report.txt" 2>&1
    cat "$O/report.txt"
  fi
  pack cache
  echo "gpu-smoke: packed into $PACK ($(($(stat -c %s "$PACK" 2>/dev/null || echo 0) >> 10)) KiB)"
  exit "$rc"
}
trap finish EXIT
# A signal ends the step in flight (timeout leads its own process group,
# which a signal to ours does not reach) and exits, through finish.
CHILD=
on_signal() {
  [ -n "$CHILD" ] && kill -TERM -- "-$CHILD" 2>/dev/null
  exit "$1"
}
trap 'on_signal 129' HUP
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

# step NAME CAP CMD...: runs CMD with the smaller of CAP and what is left of
# the budget, its output in $O/NAME.log, records rc and seconds, and packs.
step() {
  local name=$1 cap=$2 left t0 rc
  shift 2
  left=$((BUDGET - RESERVE - SECONDS))
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -le 5 ]; then
    printf '%s\tskipped\t0\n' "$name" >> "$O/steps.tsv"; echo "gpu-smoke: $name skipped: the budget is spent"; return
  fi
  t0=$SECONDS
  # In the background, so that a signal is handled at once (bash waits
  # for a foreground command first); stdin passed on (a here-document).
  timeout -k 10 "$cap" "$@" > "$O/$name.log" 2>&1 <&0 &
  CHILD=$!
  wait "$CHILD"
  rc=$?
  CHILD=
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >> "$O/steps.tsv"
  echo "gpu-smoke: $name rc=$rc in $((SECONDS - t0)) s (limit $cap s)"
  pack
}

# The report's JSON goes beside the GPU runs kept in the tree; a CPU dry
# run's stays in the work folder.
DEST=bench/gpu
[ "$DEV" = cpu ] && DEST=$O
{
  echo "# df -h /dev/shm"; df -h /dev/shm 2>&1
  echo "# nproc"; nproc 2>&1
  echo "# free -m"; free -m 2>&1
  if [ "$DEV" != cpu ]; then echo "# nvidia-smi"; nvidia-smi 2>&1; fi
} > "$O/machine.txt"
if [ "$DEV" != cpu ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$O/nvidia-smi.txt" 2>&1
fi
step env 120 "$PY" - "$DEV" <<'PYEOF'
import json, os, shutil, sys, sysconfig, time
import torch
dev = torch.device(sys.argv[1])
e = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
     "cc": shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc"),
     "python_h": os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")),
     "nproc": os.cpu_count()}
if dev.type == "cuda":
    p = torch.cuda.get_device_properties(dev)
    e.update(gpu=p.name, memory_bytes=p.total_memory, capability=f"{p.major}.{p.minor}",
             multiprocessors=p.multi_processor_count, cudnn=torch.backends.cudnn.version())
try:
    st = os.statvfs("/dev/shm")
    e["dev_shm_bytes"], e["dev_shm_free_bytes"] = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
except OSError as err:
    e["dev_shm_error"] = str(err)
try:
    if not hasattr(torch, "compile"):
        raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
    x = torch.randn(4096, device=dev, requires_grad=True)
    t0 = time.perf_counter()
    torch.compile(lambda t: (t.sin() * 2).sum())(x).backward()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    e["compile_toy_seconds"] = time.perf_counter() - t0
except Exception as err:  # noqa: BLE001 - recorded, the smoke goes on
    e["compile_error"] = f"{type(err).__name__}: {err}"[:2000]
print(json.dumps(e))
PYEOF

export TORCH_LOGS=graph_breaks,recompiles
GC="bin/gpucheck -python $PY -device $DEV -warmup $CW -worker-log -spec-dir $O/worker"
mkdir -p "$O/worker"
step resnet50_pipe 150 $GC -steps "$RS" -batch "$RB" -json "$O/resnet50_pipe.json" bench/gpu/resnet50.pipe
step resnet50_eager 60 sh -c "'$PY' bench/gpu/resnet50_plain.py --device '$DEV' --batch '$RB' --steps '$PS' --warmup '$PW' > '$O/resnet50_eager.json'"
step resnet50_compiled 120 sh -c "'$PY' bench/gpu/resnet50_plain.py --compile --device '$DEV' --batch '$RB' --steps '$PS' --warmup '$PW' > '$O/resnet50_compiled.json'"

step h2d 30 "$PY" - "$O/worker" "$DEV" "$O/h2d.json" <<'PYEOF'
# The worker registers pipe's shared memory with CUDA (pipe_torch.shm's
# Region.pin) and copies batches from it; where CUDA refuses, it stages
# them through a pinned buffer. This runs the worker's own Region.pin on a
# region made where pipe makes them, and times 64 MiB copies each way.
import json, os, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
dev, dest = sys.argv[2], sys.argv[3]
r = {"device": dev, "measured_by": "pipe_torch.shm.Region.pin on a 64 MiB region; host clock around torch.cuda.synchronize"}
try:
    import torch
    if not dev.startswith("cuda"):
        r["path"] = "none: on the CPU the worker computes on the shared memory itself"
    else:
        from pipe_torch.shm import Region
        d = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        size = 64 << 20
        fd, path = tempfile.mkstemp(dir=d, prefix="pipe-h2d-")
        try:
            os.ftruncate(fd, size)
            os.close(fd)
            torch.cuda.init()
            region = Region(path, size)
            pinned = region.pin()
            r["region_dir"] = d
            r["path"] = "registered shared memory" if pinned else "staging copy through a pinned buffer (cudaHostRegister refused)"
            src = {"pageable": torch.empty(size, dtype=torch.uint8), "pinned": torch.empty(size, dtype=torch.uint8, pin_memory=True),
                   "shared_memory" + (" registered" if pinned else " unregistered"): torch.frombuffer(region.mm, dtype=torch.uint8)}
            for k, t in src.items():
                t.to(dev, non_blocking=True)
                torch.cuda.synchronize(dev)
                t0 = time.perf_counter()
                for _ in range(5):
                    t.to(dev, non_blocking=True)
                torch.cuda.synchronize(dev)
                r[k + "_gb_per_s"] = 5 * size / (time.perf_counter() - t0) / 1e9
            del src
            region.close()
        finally:
            os.unlink(path)
except Exception as e:  # noqa: BLE001 - recorded
    r["error"] = f"{type(e).__name__}: {e}"[:1000]
with open(dest, "w") as f:
    json.dump(r, f, indent=2)
print(json.dumps(r))
sys.exit(1 if "error" in r else 0)
PYEOF

# shellcheck disable=SC2086 # the examples are a list
step gpucheck 170 $GC -steps "$CHECK_STEPS" -json "$O/gpucheck.json" $EXAMPLES
# The same fashion_mlp with its planned CUDA graph kept off (the row
# above has it on, as planned): what one graph a step saves.
step gpucheck_graph_off 60 env PIPE_TORCH_GRAPH=off $GC -steps "$CHECK_STEPS" -json "$O/gpucheck_graph_off.json" examples/fashion_mlp.pipe
step mlp_split 60 sh -c "'$PY' bench/gpu/mlp_split.py --module-dir '$O/worker' --spec '$O/worker/fashion_mlp.spec.json' --steps '$MS' --warmup $((4 * CW)) > '$O/mlp_split.json'"

S=bench/gpu/smoke.pipe
R="bin/pipe-static --log-level debug run --device $DEV --engine torch"
# The fresh run times its steps by phase (PIPE_TORCH_PHASES: host, copy,
# queue, device), which its report's step_phases holds.
step fresh 60 env PIPE_TORCH_PHASES=1 $R --max-steps "$STEPS" --checkpoint-dir "$O/ck" --report "$O/fresh.json" $S
step resume 60 $R --resume --max-steps $((2 * STEPS)) --checkpoint-dir "$O/ck" --report "$O/resume.json" $S
sed 's/^\(  loss *cross_entropy\)$/\1\n  checkpoint all/' $S > "$O/smoke_ckall.pipe"
if grep -q 'checkpoint all' "$O/smoke_ckall.pipe"; then
  step ckall 60 $R --max-steps "$STEPS" --checkpoint-dir "$O/ck2" --report "$O/ckall.json" "$O/smoke_ckall.pipe"
else
  echo "gpu-smoke: could not write the checkpoint-all variant" >&2
fi
unset TORCH_LOGS

"$PY" bench/gpu/smoke_json.py "$O" "$DEST" > "$O/report.txt" 2>&1
rc=$?
cat "$O/report.txt"
exit $rc
