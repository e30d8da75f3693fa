"""Router benchmark: cost per routing decision on an agentic credit stream.

Replays an op stream (sends, returns, FORK register/release, in rounds) through a fresh
StickyRouter per policy and repeat, timing the sends of each round as one batch. The stream is
either our own deterministic agentic stream or the exact stream aiperf's router was measured on
(../shared/bench/router-stream.jsonl.gz), so the two routers can be compared on equal input.
"""

from __future__ import annotations

import gc
import gzip
import json
import random
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.credit import Credit
from runner.errors import BadInput
from runner.routing.router import Policy, StickyRouter
from runner.trace.model import BranchMode

__all__ = ["Round", "bench_router", "generate_stream", "load_stream"]


@dataclass(slots=True)
class Round:
    returns: list[int] = field(default_factory=list)  # credit ids coming back
    register: list[tuple[str, str]] = field(default_factory=list)  # (parent, FORK child)
    release: list[str] = field(default_factory=list)  # parent ids
    sends: list[Credit] = field(default_factory=list)


# ------------------------------------------------------------------------------ streams


def load_stream(path: Path) -> list[Round]:
    """Read an op stream in aiperf's wire form (JSONL, optionally gzipped)."""
    opener = gzip.open if path.suffix == ".gz" else open
    rounds: list[Round] = [Round()]
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for line_no, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    op = json.loads(line)
                    _apply_op(rounds, op)
                except (ValueError, KeyError, TypeError) as exc:
                    raise BadInput(
                        f"{path}:{line_no}: not a router op ({exc}); expected the format of "
                        "../shared/bench/README.md"
                    ) from None
    except OSError as exc:
        raise BadInput(f"cannot read router stream {path}: {exc.strerror or exc}") from None
    return [r for r in rounds if r.sends or r.returns or r.register or r.release]


def _apply_op(rounds: list[Round], op: dict[str, Any]) -> None:
    kind = op["op"]
    current = rounds[-1]
    if kind == "send":
        current.sends.append(_credit_from_wire(op["credit"]))
    elif kind == "return":
        current.returns.append(int(op["credit_id"]))
    elif kind == "register_child_routing":
        current.register.append((op["parent"], op["child"]))
    elif kind == "release_child_routing":
        current.release.append(op["parent"])
    elif kind == "round_end":
        rounds.append(Round())
    else:
        raise ValueError(f"unknown op {kind!r}")


def _credit_from_wire(wire: dict[str, Any]) -> Credit:
    parent = wire.get("parent_correlation_id")
    mode = None
    if parent is not None:
        mode = BranchMode.SPAWN if wire.get("branch_mode") == "spawn" else BranchMode.FORK
    own = wire["x_correlation_id"]
    return Credit(
        id=int(wire["id"]),
        session_id=own,
        root_id=wire.get("root_correlation_id") or own,
        turn_index=int(wire["turn_index"]),
        num_turns=int(wire["num_turns"]),
        parent_id=parent,
        branch_mode=mode,
        depth=int(wire.get("agent_depth", 0)),
        has_forks=bool(wire.get("has_forks", False)),
        has_branches=bool(wire.get("has_forks", False)),
    )


@dataclass(slots=True, eq=False)
class _GenSession:
    sid: str
    root: str
    parent: str | None
    mode: BranchMode | None
    depth: int
    num_turns: int
    branches: dict[int, list[tuple[BranchMode, int]]]  # turn -> [(mode, child turns)]
    turn: int = 0


def generate_stream(
    credits: int, *, seed: int = 20261129, inflight: int = 256, batch: int = 32
) -> list[Round]:
    """A deterministic closed-loop agentic stream: multi-turn roots, FORK and SPAWN children
    (some at depth 2), single-turn roots and final turns that fork — the mix agentic replay
    produces. Children of a turn become ready when it returns."""
    rng = random.Random(seed)
    counter = 0

    def new_session(parent: _GenSession | None, mode: BranchMode | None, turns: int) -> _GenSession:
        nonlocal counter
        counter += 1
        sid = f"s{counter:07d}"
        depth = 0 if parent is None else parent.depth + 1
        branches: dict[int, list[tuple[BranchMode, int]]] = {}
        if depth < 2:
            for t in range(turns):
                if rng.random() < 0.12:
                    kind = BranchMode.SPAWN if rng.random() < 0.45 else BranchMode.FORK
                    branches[t] = [(kind, rng.randint(1, 6)) for _ in range(rng.randint(1, 3))]
        root = sid if parent is None else parent.root
        return _GenSession(
            sid, root, None if parent is None else parent.sid, mode, depth, turns, branches
        )

    ready: deque[_GenSession] = deque()
    flying: deque[tuple[int, _GenSession]] = deque()
    rounds: list[Round] = []
    credit_id = 0
    while credit_id < credits:
        current = Round()
        while len(flying) > inflight - batch:
            cid, session = flying.popleft()
            current.returns.append(cid)
            declared = session.branches.get(session.turn - 1, [])
            for mode, turns in declared:
                child = new_session(session, mode, turns)
                if mode is BranchMode.FORK:
                    current.register.append((session.sid, child.sid))
                ready.append(child)
            if session.turn < session.num_turns:
                ready.append(session)
            elif session.mode is BranchMode.FORK and session.parent is not None:
                current.release.append(session.parent)
        for _ in range(batch):
            if credit_id >= credits:
                break
            if not ready or rng.random() < 0.08:
                turns = 1 if rng.random() < 0.2 else rng.randint(2, 20)
                ready.append(new_session(None, None, turns))
            session = ready.popleft()
            credit_id += 1
            has_forks = any(m is BranchMode.FORK for m, _ in session.branches.get(session.turn, []))
            current.sends.append(
                Credit(
                    id=credit_id,
                    session_id=session.sid,
                    root_id=session.root,
                    turn_index=session.turn,
                    num_turns=session.num_turns,
                    parent_id=session.parent,
                    branch_mode=session.mode,
                    depth=session.depth,
                    has_forks=has_forks,
                    has_branches=session.turn in session.branches,
                )
            )
            session.turn += 1
            flying.append((credit_id, session))
        rounds.append(current)
    return rounds


# -------------------------------------------------------------------------------- timing


def _replay(router: StickyRouter, rounds: list[Round]) -> tuple[list[float], list[float]]:
    """Per-round ns per send and ns per return."""
    clock = time.perf_counter_ns
    route = router.route
    complete = router.complete
    worker_of: dict[int, int] = {}
    sends_ns: list[float] = []
    returns_ns: list[float] = []
    for rnd in rounds:
        workers = [worker_of.pop(cid) for cid in rnd.returns if cid in worker_of]
        t0 = clock()
        for worker in workers:
            complete(worker)
        t1 = clock()
        for parent, child in rnd.register:
            router.register_child(parent, child)
        for parent in rnd.release:
            router.release_child(parent)
        batch = rnd.sends
        t2 = clock()
        chosen = list(map(route, batch))  # iteration in C: the timing is the router's
        t3 = clock()
        for credit, worker in zip(batch, chosen, strict=True):
            worker_of[credit.id] = worker
        if batch:
            sends_ns.append((t3 - t2) / len(batch))
        if workers:
            returns_ns.append((t1 - t0) / len(workers))
    return sends_ns, returns_ns


def bench_router(
    rounds: list[Round], *, workers: int = 8, repeats: int = 7
) -> dict[str, dict[str, Any]]:
    """Median ns per credit for each policy, repeats interleaved so drift hits all alike."""
    per_policy: dict[Policy, tuple[list[float], list[float], list[float]]] = {
        p: ([], [], []) for p in Policy
    }
    for _ in range(repeats):
        for policy in Policy:
            router = StickyRouter(workers, policy=policy)
            gc.collect()
            gc.disable()  # a collection inside a timed batch is noise, not routing cost
            try:
                sends, returns = _replay(router, rounds)
            finally:
                gc.enable()
            samples, ret, medians = per_policy[policy]
            samples.extend(sends)
            ret.extend(returns)
            medians.append(statistics.median(sends))
    credits = sum(len(r.sends) for r in rounds)
    out: dict[str, dict[str, Any]] = {}
    for policy, (samples, ret, medians) in per_policy.items():
        ordered = sorted(samples)
        out[policy.value] = {
            "ns_per_credit": round(statistics.median(samples), 1),
            "ns_per_credit_p90": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
            "ns_per_credit_best_repeat": round(min(medians), 1),
            "ns_per_return": round(statistics.median(ret), 1) if ret else None,
            "credits": credits,
            "repeats": repeats,
        }
    return out
