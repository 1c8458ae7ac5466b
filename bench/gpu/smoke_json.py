"""Gathers what bench/gpu/smoke.sh left in its output folder into one JSON
report, bench/gpu/<gpu>.json (the GPU's name in lower case, dashes for
spaces), and prints a summary. Every figure in it comes from a measurement
named beside it: torch.cuda's allocator peaks and mem_get_info through
gpucheck, the host clock around synchronised steps, the run reports.

    python3 smoke_json.py OUT_DIR DEST_DIR
"""
import json
import os
import re
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def last_json_line(path):
    try:
        with open(path) as f:
            lines = [ln for ln in f if ln.startswith("{")]
    except OSError:
        return None
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


def steps(out):
    rows = {}
    try:
        with open(os.path.join(out, "steps.tsv")) as f:
            for ln in f:
                name, rc, secs = ln.rstrip("\n").split("\t")
                rows[name] = {"rc": None if rc == "skipped" else int(rc), "seconds": int(secs),
                              "skipped": rc == "skipped", "timed_out": rc in ("124", "137")}
    except OSError:
        pass
    return rows


def text(out, name):
    try:
        with open(os.path.join(out, name), errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def log_lines(out, name, pattern, n=6):
    try:
        with open(os.path.join(out, name + ".log"), errors="replace") as f:
            return [ln.rstrip() for ln in f if re.search(pattern, ln)][:n]
    except OSError:
        return []


def count(out, pattern, by=None):
    """Lines matching pattern in every log; by, when given, gets each
    log's own count."""
    n = 0
    for name in sorted(os.listdir(out)):
        if name.endswith(".log"):
            with open(os.path.join(out, name), errors="replace") as f:
                k = sum(1 for ln in f if re.search(pattern, ln))
            n += k
            if by is not None and k:
                by[name[:-4]] = k
    return n


def run_row(out, name, st):
    r = load(os.path.join(out, name + ".json")) or {}
    keep = ("status", "steps", "final_loss", "samples_per_second", "estimated_samples_per_second", "engine_applied",
            "estimated_peak_bytes", "measured_peak_bytes", "measured_by", "estimate_error_percent", "checkpoint", "step_phases")
    row = {k: r[k] for k in keep if k in r}
    if "checkpoint" in row:  # the machine's folder says nothing
        row["checkpoint"] = os.path.basename(row["checkpoint"])
    losses = r.get("step_losses") or []
    if losses:
        row["first_step_loss"], row["last_step_loss"] = losses[0], losses[-1]
    row.update(st.get(name, {}))
    if row.get("rc"):
        row["errors"] = log_lines(out, name, r"(?i)error|stopped|traceback|failed")
    return row


def main():
    out, dest = sys.argv[1], sys.argv[2]
    st = steps(out)
    breaks, recompiles = {}, {}
    env = last_json_line(os.path.join(out, "env.log")) or {}
    smi, machine, cache = text(out, "nvidia-smi.txt"), text(out, "machine.txt"), text(out, "inductor-cache.txt")
    rep = {"what": "make gpu-smoke (bench/gpu/smoke.sh)", "environment": env, "nvidia_smi": smi, "machine": machine,
           "steps": st, "gpucheck": load(os.path.join(out, "gpucheck.json")),
           "gpucheck_graph_off": load(os.path.join(out, "gpucheck_graph_off.json")),
           "h2d": load(os.path.join(out, "h2d.json")),
           "mlp_split": load(os.path.join(out, "mlp_split.json")),
           "runs": {n: run_row(out, n, st) for n in ("fresh", "resume", "ckall")},
           # TORCH_LOGS=graph_breaks,recompiles: one header line per break
           # and per recompilation, the explanation lines after it.
           "graph_breaks": count(out, r"\] Graph break (in user code|\(user stack)", breaks),
           "recompiles": count(out, r"\] Recompiling function", recompiles),
           "graph_breaks_by_step": breaks, "recompiles_by_step": recompiles}
    if cache:
        rep["inductor_cache"] = cache
    rp = load(os.path.join(out, "resnet50_pipe.json"))
    pipe = rp[0] if isinstance(rp, list) and rp else {}
    rn = {"pipe": pipe,
          "measured_by": "host clock around torch.cuda.synchronize; pipe: gpucheck's timed steps, eager and "
                         "compiled: resnet50_plain.py (step 1's and the steady steps' peaks apart)"}
    for mode in ("eager", "compiled"):
        plain = load(os.path.join(out, f"resnet50_{mode}.json")) or {}
        rn[mode] = plain
        if pipe.get("samples_per_second") and plain.get("images_per_second"):
            rn["ratio_" + mode] = pipe["samples_per_second"] / plain["images_per_second"]
    rep["resnet50"] = rn
    if not rep["gpucheck"]:
        rep["gpucheck_errors"] = log_lines(out, "gpucheck", r"(?i)gpucheck:|error", 12)
    name = env.get("gpu") or "cpu"
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    path = os.path.join(dest, slug + ".json")
    with open(path, "w") as f:
        json.dump(rep, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out, "smoke.json"), "w") as f:
        json.dump(rep, f, indent=2, sort_keys=True)
    print(f"gpu-smoke: {name}, torch {env.get('torch')} (CUDA {env.get('cuda')}); report {path}")
    for n, s in st.items():
        print(f"  {n:15s} rc={s['rc']} {s['seconds']} s")
    print(f"  graph breaks {rep['graph_breaks']}, recompiles {rep['recompiles']}")
    for mode in ("eager", "compiled"):
        if "ratio_" + mode in rn:
            print(f"  resnet50: pipe {pipe['samples_per_second']:.1f} images/s, torchvision {mode} "
                  f"{rn[mode]['images_per_second']:.1f}, ratio {rn['ratio_' + mode]:.3f}")
        elif rn[mode].get("error") or rn[mode].get("unavailable"):
            print(f"  resnet50 {mode}: {(rn[mode].get('error') or rn[mode]['unavailable'])[:160]}")
    if rep["h2d"]:
        print(f"  host to device: {rep['h2d'].get('path') or rep['h2d'].get('error')}")
    for k, v in ((rep["mlp_split"] or {}).get("variants") or {}).items():
        print(f"  mlp {k:14s} {v['ms_per_step']:.3f} ms a step ({v['host_ms_per_step']:.3f} ms queueing)")
    bad = [n for n, s in st.items() if s["rc"] not in (0, None)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
