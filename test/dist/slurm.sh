#!/usr/bin/env bash
# A real single-machine SLURM runs the sbatch script `pipe launch --slurm`
# writes: munged, slurmctld and slurmd are started here (no systemd) with a
# configuration written to a temporary folder, the node is this host. Two
# jobs of 2 tasks each train a small pipeline on the CPU (torch engine,
# gloo): the first runs to completion; the second is sent SIGUSR1 mid-run
# (scancel --signal=USR1, as --signal=USR1@T does ahead of a time limit),
# stops at a checkpoint, requeues itself, resumes from the checkpoint and
# must end with the first job's losses, step for step.
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
  # The daemons in reverse order of starting, each by the pid it got.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ "$rc" != 0 ]; then
    echo "slurm.sh: failed; the daemons' logs:" >&2
    tail -n 20 "$tmp"/log/*.log >&2 2>/dev/null
    for f in "$tmp"/job/*/slurm-*.out; do [ -f "$f" ] && { echo "==> $f"; grep -v "step:" "$f"; } >&2; done
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
NodeName=$host CPUs=$(nproc) State=UNKNOWN
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

# launch DIR: pipe launch --slurm writes DIR/job.sbatch (2 tasks on this
# node), its runs checkpointing and reporting in DIR.
launch() {
  mkdir -p "$1"
  cp tiny.pipe "$1/"
  (cd "$1" && "$PIPE" launch --slurm job.sbatch --engine torch --nproc-per-node 2 --pipe "$PIPE" --master-port "$(freeport)" \
    tiny.pipe -- --python "$PY" --checkpoint-dir ckpt --report report.json > launch.out)
  grep -q -- "--ntasks-per-node=2" "$1/job.sbatch" || fail "the script asks for no 2 tasks"
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

launch whole
launch stopped

t0=$SECONDS
j1=$(cd whole && sbatch --parsable job.sbatch)
jobs_submitted+=("$j1")
st=$(finish "$j1")
[ "$st" = COMPLETED ] || fail "job $j1 (uninterrupted) ended $st"
echo "slurm.sh: job $j1 (2 tasks, $EPOCHS epochs) completed in $((SECONDS - t0)) s"

t0=$SECONDS
j2=$(cd stopped && sbatch --parsable job.sbatch)
jobs_submitted+=("$j2")
# Signal once the run is two epochs in (its checkpoint of epoch 2 written).
for _ in $(seq 600); do
  grep -q "epoch done: epoch=2/" stopped/slurm-"$j2".out 2>/dev/null && break
  sleep 0.1
done
grep -q "epoch done: epoch=2/" stopped/slurm-"$j2".out || fail "job $j2 never reached its second epoch"
scancel --signal=USR1 "$j2"
st=$(finish "$j2")
out=$(cat stopped/slurm-"$j2".out)
restarts=$(scontrol show job "$j2" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
[ "$st" = COMPLETED ] || fail "job $j2 (signalled) ended $st"
[ "$restarts" = 1 ] || fail "job $j2 was requeued ${restarts:-0} times, want 1"
grep -q "requeueing job $j2" <<<"$out" || fail "job $j2 did not requeue itself"
n=$(grep -c "continuing from the run's last checkpoint" <<<"$out" || true)
[ "$n" = 2 ] || fail "$n ranks continued from the checkpoint, want 2"
at=$(sed -n 's/.*interrupted at epoch [0-9]*, step \([0-9]*\); checkpoint written.*/\1/p' <<<"$out")
[ -n "$at" ] || fail "no checkpoint written when job $j2 was signalled"
echo "slurm.sh: job $j2 signalled (USR1), stopped at a checkpoint at step $at, requeued, resumed, completed in $((SECONDS - t0)) s"

# The resumed run's report against the uninterrupted one's.
"$PY" - whole/report.json stopped/report.json <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
la, lb = a["step_losses"], b["step_losses"]
if b.get("status") != "completed" or a.get("status") != "completed":
    sys.exit(f"status: {a.get('status')} and {b.get('status')}")
if len(la) != len(lb) or not la:
    sys.exit(f"{len(la)} step losses uninterrupted, {len(lb)} resumed")
worst = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(la, lb))
print(f"slurm.sh: {len(la)} step losses, largest relative difference {worst:.2g}; "
      f"last step's loss {la[-1]:.7g} uninterrupted, {lb[-1]:.7g} resumed from step {b['resumed_from']['step']}")
if worst > 1e-5:
    sys.exit("the resumed run's losses differ from the uninterrupted run's")
EOF
echo "slurm.sh: ok in $((SECONDS - start)) s"
