#!/usr/bin/env bash
# A real single-machine SLURM runs the sbatch script `pipe launch --slurm`
# writes: munged, slurmctld and slurmd are started here (no systemd) with a
# configuration written to a temporary folder, the node is this host. Two
# jobs of that one script (2 tasks each, the default run folder) train a
# small pipeline on the CPU (torch engine, gloo) side by side: the first
# is sent SIGUSR1 mid-run (scancel --signal=USR1, as --signal=USR1@T does
# ahead of a time limit) while the second starts, stops at a checkpoint,
# requeues itself, is held until the second has checkpointed (and so is
# the pipeline's latest run), and must resume its own run, not the
# second's, and end with the second's
# uninterrupted losses, step for step, each in out/PIPELINE/runs/slurm-ID.
# Meanwhile a one-task job (sbatch -n 1) runs pipe run --nproc-per-node 2,
# which starts its own two workers, for 40 steps; a job of one rank then
# continues that 2-rank checkpoint (16 × 1 × 1 for 8 × 1 × 2, the same 16
# samples a step) at the same sample, with the uninterrupted job's losses.
#
# It installs nothing: make test-dist installs slurm-wlm and munge first.
# Run it as root (the daemons' SlurmUser). Every daemon it started is
# stopped on exit, whatever the outcome.
#
#   PIPE=bin/pipe PY=python3-with-torch bash test/dist/slurm.sh
set -euo pipefail

PIPE=$(realpath "${PIPE:-bin/pipe}")
PY=${PY:-python3}
EPOCHS=${EPOCHS:-12}

fail() { echo "slurm.sh: $*" >&2; exit 1; }
for c in munged slurmctld slurmd sbatch srun scontrol squeue scancel; do
  command -v "$c" >/dev/null || fail "$c is not installed (make test-dist installs slurm-wlm and munge)"
done
[ -x "$PIPE" ] || fail "no pipe at $PIPE (make build)"
[ "$(id -u)" = 0 ] || fail "run as root: the daemons run as SlurmUser=root"
"$PY" -c 'import torch' 2>/dev/null || fail "$PY cannot import torch (set PY)"
host=$(hostname -s)
getent hosts "$host" >/dev/null || fail "this host's name $host does not resolve; the ranks meet at it (MASTER_ADDR)"

start=$SECONDS
tmp=$(mktemp -d)
pids=()
jobs_submitted=()
cleanup() {
  local rc=$?
  set +e
  export SLURM_CONF="$tmp/slurm.conf"
  for j in "${jobs_submitted[@]}"; do scancel "$j" 2>/dev/null; done
  # The jobs' steps end (KillWait) before their slurmd is asked to.
  for _ in $(seq 60); do
    [ "${#jobs_submitted[@]}" = 0 ] || squeue -h 2>/dev/null | grep -q . || break
    sleep 0.5
  done
  # The daemons in reverse order of starting, each by the pid it got;
  # one that has not ended 10 s later is killed.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  if [ "$rc" != 0 ]; then
    echo "slurm.sh: failed; the daemons' logs:" >&2
    tail -n 20 "$tmp"/log/*.log >&2 2>/dev/null
    for f in "$tmp"/job/slurm-*.out "$tmp"/job/out/slurm_test/runs/slurm-*.out; do [ -f "$f" ] && { echo "==> $f"; grep -v "step:" "$f"; } >&2; done
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port nothing listens on, from a range the tests' own ports avoid.
freeport() {
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

mkdir -p "$tmp"/{key,sock,state,spool,log,job}
chmod 700 "$tmp/key"
chmod 755 "$tmp" "$tmp/sock"
head -c 1024 /dev/urandom > "$tmp/key/munge.key"
chmod 400 "$tmp/key/munge.key"
munged -F --socket="$tmp/sock/munge.socket" --key-file="$tmp/key/munge.key" --pid-file="$tmp/key/munged.pid" \
  --seed-file="$tmp/key/munged.seed" --log-file="$tmp/log/munged.log" > "$tmp/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$tmp/sock/munge.socket" ] && break; sleep 0.1; done
[ -S "$tmp/sock/munge.socket" ] || fail "munged did not start: $(cat "$tmp/log/munged.out")"

# The jobs run side by side: the node says it has CPUs enough for the
# three (config_overrides has slurmd take the configuration's word).
cpus=$(( $(nproc) > 6 ? $(nproc) : 6 ))
# cred_expire is also how long SLURM holds a requeued job back (120 s by
# default); the scheduler, which starts it then, runs each second here.
cat > "$tmp/slurm.conf" <<EOF
ClusterName=pipetest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(freeport)
SlurmdPort=$(freeport)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/sock/munge.socket,cred_expire=10
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
InactiveLimit=0
KillWait=10
SlurmdParameters=config_overrides
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$tmp/slurm.conf"
slurmctld -D -f "$SLURM_CONF" > "$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" > "$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  [ "$(sinfo -h -n "$host" -o %T 2>/dev/null)" = idle ] && break
  sleep 0.2
done
state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
[ "$state" = idle ] || fail "the node is ${state:-unknown}, not idle: $(tail -n 5 "$tmp"/log/slurm*.out)"
echo "slurm.sh: munged, slurmctld and slurmd up, node $host idle ($((SECONDS - start)) s)"

# 640 samples, 16 a step over the 2 tasks: 40 steps an epoch.
cd "$tmp/job"
cat > tiny.pipe <<EOF
pipeline slurm_test
seed 3
source blobs synthetic { samples 640  shape [12]  classes 4  seed 5 }
model net {
  input [12]
  dense 32 -> relu -> dense 4
}
train { epochs $EPOCHS  batch 8  optimizer adam lr 0.01  loss cross_entropy }
EOF

# launch: pipe launch --slurm writes job.sbatch (2 tasks on this node);
# its runs go to the default folder, out/slurm_test/runs/slurm-JOBID.
launch() {
  "$PIPE" launch --slurm job.sbatch --engine torch --nproc-per-node 2 --pipe "$PIPE" tiny.pipe -- --python "$PY" > launch.out
  grep -q -- "--ntasks-per-node=2" job.sbatch || fail "the script asks for no 2 tasks"
}

# finish J: waits until job J has left the queue, and prints its state.
finish() {
  local j=$1
  for _ in $(seq 600); do
    squeue -h -j "$j" 2>/dev/null | grep -q . || break
    sleep 0.5
  done
  scontrol show job "$j" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# log J: job J's output file: in the run folders' folder for the jobs of
# the script pipe launch wrote (its --output), where sbatch puts it for
# the others.
log() {
  if [ -f "out/slurm_test/runs/slurm-$1.out" ]; then echo "out/slurm_test/runs/slurm-$1.out"; else echo "slurm-$1.out"; fi
}

# reach J TEXT: waits until job J's output says TEXT.
reach() {
  for _ in $(seq 1200); do
    grep -q "$2" "$(log "$1")" 2>/dev/null && return
    sleep 0.1
  done
  fail "job $1 never said $2"
}

launch
runs=out/slurm_test/runs
t0=$SECONDS
ja=$(sbatch --parsable job.sbatch)
jobs_submitted+=("$ja")
reach "$ja" "epoch done: epoch=1/"
jb=$(sbatch --parsable job.sbatch)
jobs_submitted+=("$jb")
# A is signalled while B starts; once requeued, A is held until B's first
# checkpoint has made B's run the pipeline's latest, then let go, so that
# it starts again while B runs, whatever the machine's speed.
scancel --signal=USR1 "$ja"
for _ in $(seq 600); do
  [ "$(squeue -h -j "$ja" -o %T 2>/dev/null)" = PENDING ] && break
  sleep 0.1
done
scontrol hold "$ja"
reach "$jb" "epoch done: epoch=1/"
scontrol release "$ja"
# A one-task job meanwhile: pipe starts its own workers.
jc=$(sbatch --parsable -n 1 --cpus-per-task=1 --wrap "$PIPE run --engine torch --nproc-per-node 2 --python $PY --max-steps 40 tiny.pipe")
jobs_submitted+=("$jc")
sa=$(finish "$ja")
sb=$(finish "$jb")
sc=$(finish "$jc")
# The one-rank job continues the two-rank job's run by its id.
jd=$(sbatch --parsable -n 1 --cpus-per-task=1 --wrap "$PIPE run --engine torch --nproc-per-node 1 --batch 16 --python $PY --run-id slurm-$jc --max-steps 80 tiny.pipe")
jobs_submitted+=("$jd")
sd=$(finish "$jd")
out=$(cat "$(log "$ja")")
restarts=$(scontrol show job "$ja" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
[ "$sb" = COMPLETED ] || fail "job $jb (uninterrupted) ended $sb"
[ "$sa" = COMPLETED ] || fail "job $ja (signalled) ended $sa"
[ "$restarts" = 1 ] || fail "job $ja was requeued ${restarts:-0} times, want 1"
grep -q "requeueing job $ja" <<<"$out" || fail "job $ja did not requeue itself"
n=$(grep -c "continuing from the run's last checkpoint, $runs/slurm-$ja/" <<<"$out" || true)
[ "$n" = 2 ] || fail "$n ranks of job $ja continued from its own run's checkpoint, want 2"
# Rank 0's log (its closing words may be cut short by srun's SIGTERM
# once rank 1 has exited: the checkpoint is written by then).
at=$(sed -n 's/.*pipe: interrupted: epoch=[0-9]* step=\([0-9]*\).*/\1/p' <<<"$out" | head -n 1)
grep -q "checkpoint: path=$runs/slurm-$ja/last.ckpt reason=interrupt" <<<"$out" && [ -n "$at" ] ||
  fail "no checkpoint written when job $ja was signalled"
echo "slurm.sh: jobs $ja and $jb side by side; $ja signalled (USR1), stopped at step $at, requeued, held until $jb was the latest run, resumed its own; both completed in $((SECONDS - t0)) s"
[ "$sc" = COMPLETED ] || fail "job $jc (one task, --nproc-per-node 2) ended $sc"
grep -q "process_group gloo, rank 0 of 2" "$(log "$jc")" || fail "job $jc did not start two workers"
[ "$sd" = COMPLETED ] || fail "job $jd (one rank continuing $jc's two) ended $sd"
grep -q "the checkpoint's step is split differently" "$(log "$jd")" || fail "job $jd did not say its step is split otherwise"

# Each job's run folder holds its own run, recorded as its; nothing else.
for j in "$ja" "$jb" "$jc"; do
  [ "$(cat "$runs/slurm-$j/job" 2>/dev/null)" = "slurm-$j" ] || fail "$runs/slurm-$j records job $(cat "$runs/slurm-$j/job" 2>/dev/null)"
done
folders=$(find "$runs" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | tr '\n' ' ')
[ -f "$runs/slurm-$ja.out" ] || fail "job $ja's output is not in $runs (the script's --output)"
[ "$folders" = "$(printf '%s\n' "slurm-$ja" "slurm-$jb" "slurm-$jc" | sort | tr '\n' ' ')" ] || fail "run folders: $folders"

# The resumed run's report against the uninterrupted one's, and the
# one-task job's 40 steps against both.
# The run of job C, continued by job D, holds D's report.
"$PY" - "$runs/slurm-$jb/report.json" "$runs/slurm-$ja/report.json" "$runs/slurm-$jc/report.json" "$at" <<'EOF'
import json, sys
b, a, c = (json.load(open(p)) for p in sys.argv[1:4])
at = int(sys.argv[4])
# D continued C's 40 steps of 16 samples at 1 rank, to 80.
d, c = c, dict(c, step_losses=c["step_losses"][:40])
if (d.get("resumed_from") or {}).get("samples") != 640 or d.get("steps") != 80 or len(d["step_losses"]) != 80:
    sys.exit(f"one rank resumed from {d.get('resumed_from')}, {d.get('steps')} steps")
lb, la, lc = b["step_losses"], a["step_losses"], c["step_losses"]
if a.get("status") != "completed" or b.get("status") != "completed":
    sys.exit(f"status: {a.get('status')} resumed, {b.get('status')} uninterrupted")
if b.get("resumed_from") or (a.get("resumed_from") or {}).get("step") != at:
    sys.exit(f"resumed from {a.get('resumed_from')} (stopped at {at}); the uninterrupted from {b.get('resumed_from')}")
if not a.get("run_id") or a.get("run_id") == b.get("run_id"):
    sys.exit(f"run ids {a.get('run_id')} and {b.get('run_id')}")
if len(la) != len(lb) or not lb or len(lc) != 40:
    sys.exit(f"{len(lb)} step losses uninterrupted, {len(la)} resumed, {len(lc)} in one task")
rel = lambda x, y: abs(x - y) / max(abs(x), 1e-12)
worst = max(rel(x, y) for x, y in zip(lb, la))
worst_c = max(rel(x, y) for x, y in zip(lb, lc))
worst_d = max(rel(x, y) for x, y in zip(lb[40:80], d["step_losses"][40:80]))
print(f"slurm.sh: {len(lb)} step losses, largest relative difference {worst:.2g}; "
      f"last step's loss {lb[-1]:.7g} uninterrupted, {la[-1]:.7g} resumed from step {at}; "
      f"one task of two workers: 40 steps, largest relative difference {worst_c:.2g}; "
      f"continued by one rank from sample 640 to step 80: largest relative difference {worst_d:.2g}")
if worst > 1e-5:
    sys.exit("the resumed run's losses differ from the uninterrupted run's")
if worst_c > 1e-5:
    sys.exit("the one-task job's losses differ from the two-task job's")
if worst_d > 1e-5:
    sys.exit("the one rank's losses, continuing two ranks' checkpoint, differ from the uninterrupted job's")
EOF
echo "slurm.sh: ok in $((SECONDS - start)) s"
