"""What crosses Redis between a run's orchestrator and its client-worker hosts: the one
owner of the fleet's wire format (credits, workload, results).

Keys of one run (all under `aiperf:fleet:<run>:`):

    config        the hosts' configuration and the run's workload, sealed (runner/fleet/host.py)
    credits:<w>   a stream per client worker: the requests it must send, one entry per
                  orchestrator tick (consumer group `hosts`; an entry is acknowledged when the
                  results of all its credits are pushed), and control entries
    returns       one list: results, pushed by hosts in batches (one item a batch), popped by
                  the orchestrator
    hb:<w>        the host's heartbeat: a JSON object refreshed every HEARTBEAT_S, expiring
                  after HEARTBEAT_TTL_S, so a missing key means a host that stopped answering

The workload (every tree of the run, `encode_workload`) reaches each host once, at its start.
A credit names what to send (the tree, session template and turn, the tree instance and
session, and the routing decision's outputs: the worker is its stream, the affinity its
headers and nvext) and the host builds the body with the orchestrator's own builder settings
and salt: the same bytes as an in-process run. The engine's decisions stay in one process;
a host decides nothing, it builds, sends, and keeps its session copies. Times in results are
wall-clock seconds (`time.time()` based, taken with the host's monotonic clock): hosts on one
machine agree to the microsecond, hosts on several to NTP's precision.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from runner.affinity.emitters import AffinityDecision
from runner.client import ResponseResult
from runner.errors import ErrorCategory
from runner.metrics.gaps import decode_gaps, encode_gaps, gaps_from_text, gaps_to_text
from runner.trace.model import BranchMode, Session, Tree, Turn

__all__ = [
    "CONTROL_CANCEL",
    "CONTROL_STOP",
    "GROUP",
    "HEARTBEAT_S",
    "HEARTBEAT_TTL_S",
    "CreditEntry",
    "RunKeys",
    "Workload",
    "affinity_of",
    "decode_credits",
    "decode_results",
    "decode_workload",
    "encode_credits",
    "encode_results",
    "encode_workload",
    "result_row",
]

GROUP: Final = "hosts"
HEARTBEAT_S: Final = 0.5
# A host silent this long is lost: several missed beats, so a busy loop's jitter is not a loss.
HEARTBEAT_TTL_S: Final = 5.0
CONTROL_STOP: Final = b"stop"  # the run is over: finish, report and leave
CONTROL_CANCEL: Final = b"cancel"  # these credit ids were cancelled by the orchestrator


@dataclass(frozen=True, slots=True)
class RunKeys:
    run: str

    @property
    def prefix(self) -> str:
        return f"aiperf:fleet:{self.run}:"

    def credits(self, worker: int) -> str:
        return f"{self.prefix}credits:{worker}"

    @property
    def returns(self) -> str:
        return f"{self.prefix}returns"

    def heartbeat(self, worker: int) -> str:
        return f"{self.prefix}hb:{worker}"


# A routing decision's outputs as a credit carries them: key, nvext session_control, headers.
Affinity = tuple[str | None, Mapping[str, Any] | None, tuple[tuple[str, str], ...]]


class CreditEntry(NamedTuple):
    """One request for a host to build and send: what the engine decided, by name.

    `tree` indexes the run's workload (`encode_workload`: every tree of the run, in order);
    `template_id` and `turn_index` name the turn in it, `root_id` and `session_id` the tree
    instance and session the engine made of it; `affinity` is the routing decision's output
    as the engine made it (key, nvext session_control, headers; None: nothing), which the host
    puts on the wire exactly as the in-process sender would (runner/wallclock/prompts.py).
    `session_end`: this is the session's last turn, so the host frees its copy of the history
    once it is answered (copies it holds of sessions whose later turns went elsewhere stay:
    that is the leak legacy routing causes). A tuple: JSON writes it as an array as it is."""

    id: int
    tree: int
    template_id: str
    turn_index: int
    root_id: str
    session_id: str
    priming: bool
    session_end: bool
    affinity: Affinity | None

    def decision(self) -> AffinityDecision:
        if self.affinity is None:
            return _NO_AFFINITY
        key, control, headers = self.affinity
        return AffinityDecision(key, None, control, headers)


_NO_AFFINITY = AffinityDecision()
_dumps = json.JSONEncoder(separators=(",", ":")).encode
_loads = json.loads


def affinity_of(decision: AffinityDecision) -> Affinity | None:
    """The decision as a credit carries it (None when it carries nothing)."""
    if decision.key is None and decision.session_control is None and not decision.headers:
        return None
    return (decision.key, decision.session_control, decision.headers)


def encode_credits(entries: Sequence[CreditEntry]) -> dict[bytes, bytes]:
    """A tick's credits for one worker as one stream entry with one field: one JSON array of
    credits, each an array. No request body crosses: the host builds it from the workload
    it read once at the run's start. Redis's client packs and parses every entry and field in
    Python, so one entry per tick (instead of fields per credit) is most of what the
    orchestrator's and the hosts' busiest loops cost."""
    return {b"m": _dumps(entries).encode()}


def decode_credits(fields: dict[bytes, bytes]) -> list[CreditEntry]:
    credits: list[CreditEntry] = []
    for row in _loads(fields[b"m"]):
        affinity = row[8]
        if affinity is not None:
            key, control, headers = affinity
            row[8] = (key, control, tuple((name, value) for name, value in headers))
        credits.append(CreditEntry(*row))
    return credits


# ------------------------------------------------------------------------------- workload


@dataclass(frozen=True, slots=True)
class Workload:
    """What every host of a run needs to build its requests, read once at the run's start:
    the run's trees (in the order credits index them) with the scope each one's hash ids are
    drawn from, and the request builder's settings, its salt included (the same markers and
    affinity ids as the orchestrator's own builder would put on the wire)."""

    trees: tuple[Tree, ...]
    scopes: tuple[str, ...]
    model: str
    salt: str
    isolate_trees: bool
    want_worker_id: bool
    ignore_eos: bool


def encode_workload(workload: Workload) -> bytes:
    """The workload as compressed JSON: per tree its ids, block size, scope and sessions, per
    session what building a request reads (its parent, how it branched, the declaring turn,
    and per turn the token counts, hash ids, literal messages and extra body keys); timing
    and branches stay with the engine."""
    trees = []
    for tree, scope in zip(workload.trees, workload.scopes, strict=True):
        sessions = [
            [
                s.id,
                s.parent_id,
                None if s.mode is None else s.mode.value,
                _declaring(tree, s),
                [
                    [
                        t.input_tokens,
                        t.output_tokens,
                        t.hash_ids,
                        t.messages,
                        t.extra_body,
                    ]
                    for t in s.turns
                ],
            ]
            for s in tree.sessions.values()
        ]
        trees.append([tree.id, tree.root_id, tree.block_size, scope, sessions])
    doc = {
        "model": workload.model,
        "salt": workload.salt,
        "isolate_trees": workload.isolate_trees,
        "want_worker_id": workload.want_worker_id,
        "ignore_eos": workload.ignore_eos,
        "trees": trees,
    }
    return zlib.compress(_dumps(doc).encode(), 6)


def decode_workload(data: bytes) -> Workload:
    doc = _loads(zlib.decompress(data))
    trees: list[Tree] = []
    scopes: list[str] = []
    for tree_id, root_id, block_size, scope, sessions in doc["trees"]:
        built: dict[str, Session] = {}
        for sid, parent_id, mode, declaring, turns in sessions:
            built[sid] = Session(
                id=sid,
                parent_id=parent_id,
                mode=None if mode is None else BranchMode(mode),
                declaring_turn=declaring,
                turns=tuple(
                    Turn(
                        index=index,
                        input_tokens=input_tokens,
                        output_tokens=output_tokens,
                        hash_ids=tuple(hash_ids),
                        messages=None if messages is None else tuple(messages),
                        extra_body=extra_body,
                    )
                    for index, (input_tokens, output_tokens, hash_ids, messages, extra_body) in (
                        enumerate(turns)
                    )
                ),
            )
        trees.append(Tree(id=tree_id, root_id=root_id, sessions=built, block_size=block_size))
        scopes.append(scope)
    return Workload(
        trees=tuple(trees),
        scopes=tuple(scopes),
        model=doc["model"],
        salt=doc["salt"],
        isolate_trees=doc["isolate_trees"],
        want_worker_id=doc["want_worker_id"],
        ignore_eos=doc["ignore_eos"],
    )


def _declaring(tree: Tree, session: Session) -> int | None:
    """The parent's turn that names `session` (a tree built by hand may not say)."""
    if session.declaring_turn is not None or session.parent_id is None:
        return session.declaring_turn
    parent = tree.sessions[session.parent_id]
    return next(
        (t.index for t in parent.turns for b in t.branches if session.id in b.children), None
    )


# -------------------------------------------------------------------------------- results


def result_row(credit_id: int, result: ResponseResult, wall_offset_s: float) -> list[Any]:
    """One result as `encode_results` carries it. `wall_offset_s` turns the host's monotonic
    times into wall-clock times. Chunk arrival times travel as first, last and count: all the
    orchestrator derives from them is the mean inter-token latency and the record's gaps,
    which travel packed (4 bytes a gap, base64), not as a float per chunk."""
    chunks = result.chunk_times_s
    return [
        credit_id,
        result.start_s + wall_offset_s,
        result.end_s + wall_offset_s,
        None if result.first_token_s is None else result.first_token_s + wall_offset_s,
        # Every gap too (runner.metrics.gaps, base64): the record keeps them for `verify`.
        [
            chunks[0] + wall_offset_s,
            chunks[-1] + wall_offset_s,
            len(chunks),
            gaps_to_text(encode_gaps(chunks)),
        ]
        if chunks
        else None,
        result.output_tokens,
        result.prompt_tokens,
        result.cached_tokens,
        result.served_by,
        result.status,
        None if result.error is None else str(result.error),
        result.error_detail,
        result.finish_reason,
    ]


def _arrivals(first_s: float, gaps: bytes) -> list[float]:
    at_us = round(first_s * 1e6)
    out = []
    for gap_us in decode_gaps(gaps):
        at_us += gap_us
        out.append(at_us / 1e6)
    return out


def encode_results(rows: Sequence[list[Any]]) -> bytes:
    """Results a host pushes together, as one list item: one JSON array of `result_row`s
    (one parse per batch on the orchestrator, not one per result)."""
    return _dumps(rows).encode()


def decode_results(data: bytes, wall_offset_s: float) -> list[tuple[int, ResponseResult]]:
    """The inverse of `encode_results`, onto the orchestrator's monotonic clock (wall-clock
    time minus `wall_offset_s`)."""
    out: list[tuple[int, ResponseResult]] = []
    for (
        credit_id,
        start,
        end,
        first,
        chunks,
        output_tokens,
        prompt_tokens,
        cached_tokens,
        served_by,
        status,
        error,
        detail,
        finish,
    ) in _loads(data):
        chunk_times: tuple[float, ...] = ()
        if chunks is not None:
            lo, hi, count = chunks[:3]
            lo -= wall_offset_s
            hi -= wall_offset_s
            if count == 1:
                chunk_times = (lo,)
            elif len(chunks) > 3:
                # The first arrival plus every gap: the record's gaps as the host measured.
                chunk_times = (lo, *_arrivals(lo, gaps_from_text(chunks[3])))
            else:
                # Evenly spread between the first and last arrival: the same count and gap.
                step = (hi - lo) / (count - 1)
                chunk_times = tuple([lo + step * i for i in range(count - 1)] + [hi])
        out.append(
            (
                credit_id,
                ResponseResult(
                    start_s=start - wall_offset_s,
                    end_s=end - wall_offset_s,
                    first_token_s=None if first is None else first - wall_offset_s,
                    chunk_times_s=chunk_times,
                    output_tokens=output_tokens,
                    prompt_tokens=prompt_tokens,
                    cached_tokens=cached_tokens,
                    served_by=served_by,
                    status=status,
                    error=None if error is None else ErrorCategory(error),
                    error_detail=detail,
                    finish_reason=finish,
                ),
            )
        )
    return out
