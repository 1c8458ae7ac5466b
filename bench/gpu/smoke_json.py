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


def log_lines(out, name, pattern, n=6):
    try:
        with open(os.path.join(out, name + ".log"), errors="replace") as f:
            return [ln.rstrip() for ln in f if re.search(pattern, ln)][:n]
    except OSError:
        return []


def count(out, pattern):
    n = 0
    for name in sorted(os.listdir(out)):
        if name.endswith(".log"):
            with open(os.path.join(out, name), errors="replace") as f:
                n += sum(1 for ln in f if re.search(pattern, ln))
    return n


def run_row(out, name, st):
    r = load(os.path.join(out, name + ".json")) or {}
    keep = ("status", "steps", "final_loss", "samples_per_second", "estimated_samples_per_second", "engine_applied",
            "estimated_peak_bytes", "measured_peak_bytes", "measured_by", "estimate_error_percent", "checkpoint")
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
    env = last_json_line(os.path.join(out, "env.log")) or {}
    smi = None
    try:
        with open(os.path.join(out, "nvidia-smi.txt")) as f:
            smi = f.read().strip()
    except OSError:
        pass
    rep = {"what": "make gpu-smoke (bench/gpu/smoke.sh)", "environment": env, "nvidia_smi": smi, "steps": st,
           "gpucheck": load(os.path.join(out, "gpucheck.json")),
           "runs": {n: run_row(out, n, st) for n in ("fresh", "resume", "ckall")},
           # TORCH_LOGS=graph_breaks,recompiles: one header line per break
           # and per recompilation, the explanation lines after it.
           "graph_breaks": count(out, r"\] Graph break (in user code|\(user stack)"),
           "recompiles": count(out, r"\] Recompiling function")}
    rp = load(os.path.join(out, "resnet50_pipe.json"))
    pipe = rp[0] if isinstance(rp, list) and rp else {}
    plain = load(os.path.join(out, "resnet50_plain.json")) or {}
    rn = {"pipe": pipe, "plain": plain,
          "measured_by": "host clock around torch.cuda.synchronize; pipe: gpucheck's timed steps, plain: resnet50_plain.py"}
    if pipe.get("samples_per_second") and plain.get("images_per_second"):
        rn["ratio"] = pipe["samples_per_second"] / plain["images_per_second"]
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
    if "ratio" in rn:
        print(f"  resnet50: pipe {pipe['samples_per_second']:.0f} images/s, plain {plain['images_per_second']:.0f}, "
              f"ratio {rn['ratio']:.3f}")
    bad = [n for n, s in st.items() if s["rc"] not in (0, None)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
