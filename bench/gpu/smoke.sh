#!/usr/bin/env bash
# make gpu-smoke: the torch engine's first end-to-end check on one GPU, in
# at most SMOKE_SECONDS (default 480), from what make gpu-bundle builds (no
# Go or GDAL needed): bin/pipe-static, bin/gpucheck, examples/, bench/gpu/.
#   1. the environment: torch, CUDA, the GPU, a C compiler and Python.h
#      (Triton builds its launcher with them), one compiled toy step;
#   2. four examples x 80 steps through gpucheck (planned against measured
#      memory, pipe's samples/s against a plain loop in the same worker);
#   3. a fresh run of bench/gpu/smoke.pipe, a --resume of it, and a run with
#      `checkpoint all`; graph breaks and recompiles counted (TORCH_LOGS);
#   4. ResNet-50 224x224 bf16 in images/s: pipe (gpucheck) against
#      torchvision's model in a plain loop (bench/gpu/resnet50_plain.py).
# It writes bench/gpu/<gpu>.json (bench/gpu/smoke_json.py) and keeps the
# logs in the output folder (first argument, default out/gpu-smoke). With
# no GPU it says so and exits 2. SMOKE_DEVICE=cpu runs the same steps on
# the CPU, to check the script itself (with SMOKE_RESNET_BATCH=2,
# SMOKE_RESNET_STEPS=8, SMOKE_CHECK_STEPS=8, say). Every step has its own time limit,
# so one that hangs costs its limit and no more.
set -u
PY=${PY:-python3}
O=${1:-out/gpu-smoke}
DEV=${SMOKE_DEVICE:-cuda:0}
BUDGET=${SMOKE_SECONDS:-480}
STEPS=${SMOKE_STEPS:-20}
# gpucheck times its steps after 5 warm-up ones: the first H100 runs
# showed 15 timed steps moving a plain loop's samples/s by 1.6x between
# runs, so it takes more; a step is milliseconds beside the compile.
CHECK_STEPS=${SMOKE_CHECK_STEPS:-80}
RB=${SMOKE_RESNET_BATCH:-256}
RS=${SMOKE_RESNET_STEPS:-40}
export PIPE_PYTHON=$PY
for f in bin/pipe-static bin/gpucheck bench/gpu/smoke_json.py bench/gpu/resnet50_plain.py; do
  [ -e "$f" ] || { echo "gpu-smoke: $f is missing; run make gpu-bundle where Go is and bring bin/ along" >&2; exit 1; }
done
if [ "$DEV" != cpu ] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu-smoke: no GPU here (nvidia-smi is absent or lists none); nothing was checked" >&2
  exit 2
fi
mkdir -p "$O"
: > "$O/steps.tsv"

# step NAME CAP CMD...: runs CMD with the smaller of CAP and what is left of
# the budget, its output in $O/NAME.log, and records rc and seconds.
step() {
  local name=$1 cap=$2 left t0 rc
  shift 2
  left=$((BUDGET - SECONDS))
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -le 5 ]; then
    printf '%s\tskipped\t0\n' "$name" >> "$O/steps.tsv"; echo "gpu-smoke: $name skipped: the budget is spent"; return
  fi
  t0=$SECONDS
  timeout -k 10 "$cap" "$@" > "$O/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >> "$O/steps.tsv"
  echo "gpu-smoke: $name rc=$rc in $((SECONDS - t0)) s (limit $cap s)"
}

if [ "$DEV" != cpu ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$O/nvidia-smi.txt" 2>&1
fi
step env 120 "$PY" - "$DEV" <<'PYEOF'
import json, os, shutil, sys, sysconfig, time
import torch
dev = torch.device(sys.argv[1])
e = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
     "cc": shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc"),
     "python_h": os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))}
if dev.type == "cuda":
    p = torch.cuda.get_device_properties(dev)
    e.update(gpu=p.name, memory_bytes=p.total_memory, capability=f"{p.major}.{p.minor}",
             multiprocessors=p.multi_processor_count, cudnn=torch.backends.cudnn.version())
try:
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
step gpucheck 240 bin/gpucheck -python "$PY" -device "$DEV" -steps "$CHECK_STEPS" -json "$O/gpucheck.json" \
  examples/fashion_mlp.pipe examples/fashion.pipe examples/vit_fashion.pipe examples/volume_unet.pipe
cat "$O/gpucheck.log"

S=bench/gpu/smoke.pipe
sed 's/^\(  loss *cross_entropy\)$/\1\n  checkpoint all/' $S > "$O/smoke_ckall.pipe"
grep -q 'checkpoint all' "$O/smoke_ckall.pipe" || { echo "gpu-smoke: could not write the checkpoint-all variant" >&2; exit 1; }
R="bin/pipe-static --log-level debug run --device $DEV --engine torch"
step fresh 90 $R --max-steps "$STEPS" --checkpoint-dir "$O/ck" --report "$O/fresh.json" $S
step resume 90 $R --resume --max-steps $((2 * STEPS)) --checkpoint-dir "$O/ck" --report "$O/resume.json" $S
step ckall 90 $R --max-steps "$STEPS" --checkpoint-dir "$O/ck2" --report "$O/ckall.json" "$O/smoke_ckall.pipe"
unset TORCH_LOGS

step resnet50_pipe 180 bin/gpucheck -python "$PY" -device "$DEV" -steps "$RS" -batch "$RB" -json "$O/resnet50_pipe.json" bench/gpu/resnet50.pipe
step resnet50_plain 120 sh -c "'$PY' bench/gpu/resnet50_plain.py --device '$DEV' --batch '$RB' --steps 25 --warmup 5 > '$O/resnet50_plain.json'"

"$PY" bench/gpu/smoke_json.py "$O" bench/gpu
