"""The agent-tree view's read model: sampled trees (sessions, their client and inference
workers, bounces, first-turn cache hits, the timeline's requests) from a bounded scan of a
run's records, kept once the run has ended."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from aiperf_web.reports.models import RunTrees
from aiperf_web.runs.models import FINAL, Run, RunRecord

TREE_SCAN_RECORDS = 20_000
TREES_SHOWN = 6
# The shape of the stored tree data: a run's trees stored in an older shape are built again
# (2: each session's requests, for the timeline).
TREES_VERSION = 2


def _tree_layout(sessions: dict[str, dict[str, Any]], root: str) -> None:
    """x = depth; y = leaves top to bottom, a parent centred on its children."""
    children: dict[str, list[str]] = defaultdict(list)
    for sid, node in sessions.items():
        if sid == root:
            continue
        # A session whose parent sent nothing in the scanned records (a grandchild of a child
        # with no records of its own) hangs off the root, so that every node is laid out.
        children[node["parent"] if node["parent"] in sessions else root].append(sid)
    for kids in children.values():
        kids.sort(key=lambda s: sessions[s]["start_s"])
    next_leaf = 0.0
    # Iterative post-order (trees can be deep): a node's y is known after its children's.
    stack: list[tuple[str, bool]] = [(root, False)]
    while stack:
        sid, done = stack.pop()
        kids = children.get(sid, [])
        if done or not kids:
            if kids:
                sessions[sid]["y"] = sum(sessions[k]["y"] for k in kids) / len(kids)
            else:
                sessions[sid]["y"] = next_leaf
                next_leaf += 1
            continue
        stack.append((sid, True))
        for kid in reversed(kids):
            stack.append((kid, False))


def trees_build(records: Sequence[Mapping[str, Any]], *, limit: int = TREES_SHOWN) -> list[Any]:
    """Sampled agent trees from records: nodes = sessions with the client worker of each turn
    (a bounce is a session on more than one), the inference worker of its first turn and
    whether that first turn hit the prefix cache."""
    by_root: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        root, sid = r.get("root_id"), r.get("session_id")
        if not root or not sid:
            continue
        node = by_root[root].get(sid)
        if node is None:
            node = by_root[root][sid] = {
                "id": sid,
                "parent": r.get("parent_id"),
                "depth": int(r.get("depth") or 0),
                "branch_mode": r.get("branch_mode") or "root",
                "start_s": float(r.get("start_s") or 0.0),
                "turns": [],
            }
        node["start_s"] = min(node["start_s"], float(r.get("start_s") or 0.0))
        node["turns"].append(
            (
                int(r.get("turn_index") or 0),
                r.get("client_worker"),
                r.get("inference_worker"),
                r.get("cached_tokens"),
                r.get("prompt_tokens"),
                r.get("error"),
                r.get("start_s"),
                r.get("end_s"),
            )
        )
    # The trees with the most sessions first: they are the ones bounces and lineage show in.
    ranked = sorted(by_root.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:limit]
    trees = []
    for root, sessions in ranked:
        if root not in sessions:
            # The root's turns fell outside the scanned records: attach orphans to a stub.
            sessions[root] = {
                "id": root, "parent": None, "depth": 0, "branch_mode": "root",
                "start_s": min(s["start_s"] for s in sessions.values()), "turns": [],
            }  # fmt: skip
        nodes = []
        for node in sessions.values():
            turns = sorted(node.pop("turns"), key=lambda t: (t[0], t[6] or 0.0))
            workers = [t[1] for t in turns if t[1] is not None]
            first = turns[0] if turns else None
            switches = sum(1 for a, b in itertools.pairwise(workers) if a != b)
            node.update(
                {
                    "turns": len(turns),
                    "client_workers": workers,
                    "switches": switches,
                    "bounced": len(set(workers)) > 1,
                    "inference_worker": first[2] if first else None,
                    "first_cached_tokens": first[3] if first else None,
                    "first_prompt_tokens": first[4] if first else None,
                    "first_turn_hit": bool(first and first[3]) if first else None,
                    "first_turn_index": first[0] if first else None,
                    "errors": sum(1 for t in turns if t[5]),
                    # The timeline's bars: [turn, start_s, end_s, client worker, inference
                    # worker, cached tokens, prompt tokens, error] per request, in turn order.
                    "requests": [
                        [t[0], t[6], t[7], t[1], t[2], t[3], t[4], t[5]]
                        for t in turns
                        if t[6] is not None and t[7] is not None
                    ],
                }
            )
            nodes.append(node)
        _tree_layout(sessions, root)
        trees.append(
            {
                "root": root,
                "sessions": len(nodes),
                "bounced": sum(1 for n in nodes if n["bounced"]),
                "nodes": sorted(nodes, key=lambda n: (n["depth"], n["y"])),
            }
        )
    return trees


def run_trees(*, run_obj: Run) -> dict[str, Any]:
    """The agent-tree view's data: built from the first TREE_SCAN_RECORDS records (a bounded
    read whatever the run's size) and kept once the run has ended."""
    if run_obj.status in FINAL:
        stored = RunTrees.objects.filter(run=run_obj).values_list("data", flat=True).first()
        if stored is not None and stored.get("version") == TREES_VERSION:
            return dict(stored)
    rows = (
        RunRecord.objects.filter(run=run_obj, warmup=False)
        .order_by("seq")
        .values_list("data", flat=True)[:TREE_SCAN_RECORDS]
    )
    records = list(rows)
    data = {
        "version": TREES_VERSION,
        "scanned_records": len(records),
        "complete": len(records) < TREE_SCAN_RECORDS,
        "trees": trees_build(records),
    }
    if run_obj.status in FINAL:
        RunTrees.objects.update_or_create(run=run_obj, defaults={"data": data})
    return data
