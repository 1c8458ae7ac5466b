"""Meeting the other ranks. Rank 0 holds a TCPStore at the master's
address; every rank checks in there, and while ranks are missing each
says every few seconds, on stderr behind PROGRESS, who it waits for. At
the deadline it fails naming the ranks that never came, as a pipe error
and never a traceback (pipe's engine/torch/worker.go reads the lines)."""

import datetime
import json
import os
import sys
import time

from .wire import Failure

PROGRESS = "PIPE-RENDEZVOUS "
EVERY = 5.0  # seconds between progress lines


def report(rank, where, present, missing, waited, limit):
    sys.stderr.write(PROGRESS + json.dumps({"rank": rank, "at": where, "present": present, "missing": missing,
                                            "waited_s": round(waited), "timeout_s": limit}) + "\n")
    sys.stderr.flush()


def connect(dist, addr, port, world, rank, limit, t0):
    """A client of rank 0's store, retried until the deadline: rank 0 may
    start after the others."""
    where = f"{addr}:{port}"
    last = t0
    while True:
        left = limit - (time.monotonic() - t0)
        if left <= 0:
            raise Failure("error", f"rank {rank} could not reach rank 0 at {where} within {limit} s: start rank 0 "
                          "(--node-rank 0) there, or check --master-addr and --master-port and the network between them")
        try:
            return dist.TCPStore(addr, port, world, False, datetime.timedelta(seconds=min(EVERY, left)))
        except Exception:  # noqa: BLE001 - torch's store says "connect timeout" or "Socket Timeout" by version
            now = time.monotonic()
            if now - last >= EVERY - 0.5:
                report(rank, where, [], [0], now - t0, limit)
                last = now


def meet(dist, d):
    """The store every rank has checked in to, once all have, and the
    largest launcher restart count any rank said there (d["restarts"]):
    a launcher counts only the ranks it restarted for a failure, so this
    is how a rank learns that its world was restarted."""
    addr, port, rank, world = d["master_addr"], int(d["master_port"]), int(d["rank"]), int(d["world_size"])
    limit = int(d.get("rendezvous_timeout_s") or 300)
    where = f"{addr}:{port}"
    t0 = time.monotonic()
    if d.get("agent_store"):
        store = own_store(dist, addr, port, world, rank, limit, t0)
    elif rank == 0:
        try:
            store = dist.TCPStore(addr, port, world, True, datetime.timedelta(seconds=limit), wait_for_workers=False)
        except Exception as e:  # noqa: BLE001
            raise Failure("error", f"rank 0 cannot listen at {where}: {e} (is another run using the port? "
                          "give another --master-port)") from e
    else:
        store = connect(dist, addr, port, world, rank, limit, t0)
    # The store is this start's alone (rank 0's worker made it), so the
    # keys need no name of the start: the restart counts, which once
    # named them, differ between ranks of one start.
    pre = "pipe/"
    store.set(f"{pre}restarts/{rank}", str(int(d.get("restarts") or 0)))
    store.add(f"{pre}in/{rank}", 1)
    store.add(f"{pre}joined", 1)
    last = t0
    while True:
        # add(key, 0) reads a counter without waiting, where get would
        # wait for a key that is not there yet: one read a poll, and the
        # ranks one by one only when they are to be named.
        if store.add(f"{pre}joined", 0) >= world:
            restarts = max(int(store.get(f"{pre}restarts/{r}")) for r in range(world))
            return store, restarts
        now = time.monotonic()
        if now - t0 < limit and now - last < EVERY:
            time.sleep(0.2)
            continue
        present = [r for r in range(world) if store.add(f"{pre}in/{r}", 0) > 0]
        missing = [r for r in range(world) if r not in present]
        if now - t0 >= limit:
            raise Failure("error", f"ranks {', '.join(map(str, missing))} never joined the rendezvous at {where} within "
                          f"{limit} s (present: {', '.join(map(str, present))}): start them with the same --master-addr, "
                          "--master-port and --nnodes, each with its own --node-rank")
        report(rank, where, present, missing, now - t0, limit)
        last = now


STORE_KEY = "pipe/store"


def own_store(dist, addr, port, world, rank, limit, t0):
    """Under torchrun's agent store (torch 2.x), a store of this start's
    own. The agent's outlives the start, with the last start's keys in
    it, and nothing the ranks are told names the start (each rank's
    restart count is its own): so rank 0 opens a store at a free port and
    announces it, with a token, in the agent's; another rank takes an
    announcement only once the store it names answers with its token
    (an earlier start's names a store that is gone)."""
    agent = connect(dist, addr, port, world, rank, limit, t0)
    if rank == 0:
        try:
            own = dist.TCPStore(addr, 0, world, True, datetime.timedelta(seconds=limit), wait_for_workers=False)
        except Exception as e:  # noqa: BLE001
            raise Failure("error", f"rank 0 cannot listen at {addr}: {e}") from e
        token = os.urandom(8).hex()
        own.set("pipe/token", token)
        agent.set(STORE_KEY, f"{own.port} {token}")
        return own
    last = t0
    while True:
        left = limit - (time.monotonic() - t0)
        if left <= 0:
            raise Failure("error", f"rank {rank} found no store of rank 0's announced at {addr}:{port} within {limit} s: "
                          "start rank 0 with the others")
        wait = datetime.timedelta(seconds=min(EVERY, left))
        try:
            agent.set_timeout(wait)
            own_port, token = agent.get(STORE_KEY).decode().split()
            own = dist.TCPStore(addr, int(own_port), world, False, wait)
            if own.get("pipe/token").decode() == token:
                return own
        except Exception:  # noqa: BLE001 - not announced yet, or an earlier start's store: gone, or another's
            pass
        now = time.monotonic()
        if now - last >= EVERY - 0.5:
            report(rank, f"{addr}:{port}", [], [0], now - t0, limit)
            last = now
        time.sleep(0.2)


# What gloo and NCCL say on a rank whose peer went away (errors.go's
# peerLostSigns, which the tests hold to this list).
PEER_LOST = ("Connection reset by peer", "Connection closed by peer", "Broken pipe",
             "remote process exited", "NCCL communicator was aborted", "Socket Timeout")


def peer_lost(msg):
    return any(s in msg for s in PEER_LOST)


def who_left(store, rank, world, wait=5.0):
    """After a collective failed because a peer went away, which one: every
    rank that is left checks in at the store, and those that have not
    within wait seconds are named, by the lowest rank left alone (the
    others point at it), so that the job's output names them once. The
    store is rank 0's: when it cannot be reached, rank 0 went away."""
    pre = "pipe/left/"
    try:
        store.add(f"{pre}{rank}", 1)
        t0 = time.monotonic()
        while True:
            present = [r for r in range(world) if r == rank or store.add(f"{pre}{r}", 0) > 0]
            if len(present) == world or time.monotonic() - t0 >= wait:
                break
            time.sleep(0.2)
    except Exception:  # noqa: BLE001 - the store's own error says only that it is gone
        return "rank 0 went away (its store cannot be reached): it died, was killed, or its machine or network failed"
    missing = [r for r in range(world) if r not in present]
    if not missing:
        return "a peer rank failed"
    if rank != min(present):
        return f"a peer rank went away (rank {min(present)} names it)"
    who = "rank " + str(missing[0]) if len(missing) == 1 else "ranks " + ", ".join(map(str, missing))
    return f"{who} went away: it died, was killed, or its machine or network failed"
