#!/bin/bash
# vit_fashion.sh: trains examples/vit_fashion.pipe with pipe's native engine
# and the same model in plain PyTorch (bench/vit_fashion_torch.py), one
# after the other on this machine, 2 threads each, and prints both results:
# pipe's report (test accuracy, train seconds, steps) and PyTorch's JSON
# lines.
#
#   bench/vit_fashion.sh [EPOCHS]     (from the repository's root; default 5)
set -euo pipefail
epochs=${1:-5}
out=${OUT:-out/vit_fashion_bench}
mkdir -p "$out"
export CGO_LDFLAGS=${CGO_LDFLAGS:--lopenblas}
go build -o "$out/pipe" ./cmd/pipe
sed "s/epochs 5 /epochs $epochs /" examples/vit_fashion.pipe > "$out/vit_fashion.pipe"
echo "== pipe (native, 2 threads), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$out/pipe" run --threads 2 --log-every 100 --checkpoint-dir "$out/ckpt" --report "$out/pipe.json" "$out/vit_fashion.pipe" 2>&1 | tail -n 8
/usr/bin/python3 - "$out/pipe.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"engine": "pipe native", "epochs": r["epochs"], "steps": r["steps"], "train_seconds": round(r["train_seconds"], 2),
                  "ms_per_step": round(1000 * r["train_seconds"] / max(r["steps"], 1), 1), "metrics": r.get("metrics")}))
PY
echo "== PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') (2 threads), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 bench/vit_fashion_torch.py --epochs "$epochs" --threads 2
