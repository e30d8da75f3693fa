"""Reads of traces and scenarios, always scoped to the requester's teams."""

from __future__ import annotations

from typing import Any, TypedDict, cast

from django.core.cache import cache
from django.db.models import Q, QuerySet

from aiperf_web.core.errors import NotFound
from aiperf_web.core.ids import parse_uuid
from aiperf_web.core.tags import tag_filter_value
from aiperf_web.scenarios.models import Scenario, Trace
from aiperf_web.scenarios.services import trace_loaded
from aiperf_web.teams.selectors import AnyUser, team_ids_for


def trace_list(*, user: AnyUser) -> QuerySet[Trace]:
    # The file body stays in the database unless asked for.
    return (
        Trace.objects.filter(team_id__in=team_ids_for(user=user))
        .defer("content_gz")
        .select_related("team")
        .order_by("team__name", "name")
    )


def trace_get(*, user: AnyUser, trace_id: object) -> Trace:
    uid = parse_uuid(trace_id)
    trace = trace_list(user=user).filter(uuid=uid).first() if uid else None
    if trace is None:
        raise NotFound("trace not found")
    return trace


def scenario_list(*, user: AnyUser, tag: str = "", search: str = "") -> QuerySet[Scenario]:
    qs = (
        Scenario.objects.filter(team_id__in=team_ids_for(user=user))
        .select_related("team")
        .prefetch_related("traces")
        .order_by("team__name", "name")
    )
    if tag:
        qs = qs.filter(tags__contains=tag_filter_value(tag))
    if search:
        qs = qs.filter(Q(name__icontains=search) | Q(description__icontains=search))
    return qs


def scenario_get(*, user: AnyUser, scenario_id: object) -> Scenario:
    uid = parse_uuid(scenario_id)
    scenario = scenario_list(user=user).filter(uuid=uid).first() if uid else None
    if scenario is None:
        raise NotFound("scenario not found")
    return scenario


# -- the trace page's agent trees ----------------------------------------------------------------

# Bounds of what the page lists and draws, whatever the file holds (a trace may have thousands
# of trees, a tree thousands of subagents): the tables keep their largest rows, the drawing its
# first nodes in depth-first order.
TREES_LISTED = 200
AGENTS_LISTED = 500
NODES_DRAWN = 400
AGENTS_CACHE_S = 24 * 3600


class TreeRow(TypedDict):
    id: str
    sessions: int
    requests: int
    fork_children: int
    spawn_children: int
    max_depth: int
    span_s: float
    input_tokens: int
    output_tokens: int


class AgentRow(TypedDict):
    tree: str
    id: str
    parent: str | None
    mode: str  # root, fork or spawn
    subagent_type: str
    depth: int
    turns: int
    children: int
    start_s: float
    span_s: float
    input_tokens_max: int
    output_tokens: int


class DrawnNode(TypedDict):
    id: str
    mode: str
    subagent_type: str
    depth: int
    turns: int
    children: int


class TraceAgents(TypedDict):
    trees: list[TreeRow]
    trees_total: int
    agents: list[AgentRow]
    agents_total: int
    drawn: dict[str, list[DrawnNode]]  # per listed tree id (the largest few), depth-first
    drawn_cut: dict[str, int]  # nodes left out of a drawing


def _agent_rows(tree: Any) -> list[AgentRow]:
    children: dict[str, int] = {}
    for session in tree.sessions.values():
        if session.parent_id is not None:
            children[session.parent_id] = children.get(session.parent_id, 0) + 1
    rows: list[AgentRow] = []
    for session in tree.sessions.values():
        turns = session.turns
        start = min((t.t_s for t in turns), default=0.0)
        end = max((t.t_s + t.duration_s for t in turns), default=0.0)
        rows.append(
            {
                "tree": tree.id, "id": session.id, "parent": session.parent_id,
                "mode": session.mode.value if session.mode is not None else "root",
                "subagent_type": session.subagent_type or "", "depth": session.depth,
                "turns": len(turns), "children": children.get(session.id, 0),
                "start_s": round(start, 3), "span_s": round(end - start, 3),
                "input_tokens_max": max((t.input_tokens for t in turns), default=0),
                "output_tokens": sum(t.output_tokens for t in turns),
            }
        )  # fmt: skip
    return rows


def _drawn(tree: Any, rows: list[AgentRow]) -> tuple[list[DrawnNode], int]:
    """The tree depth-first from its root, children in start order: a flat list the page
    indents by depth."""
    by_id = {r["id"]: r for r in rows}
    kids: dict[str, list[str]] = {}
    for r in rows:
        if r["parent"] is not None and r["parent"] in by_id:
            kids.setdefault(r["parent"], []).append(r["id"])
    for ids in kids.values():
        ids.sort(key=lambda i: (by_id[i]["start_s"], i))
    out: list[DrawnNode] = []
    stack = [tree.root_id]
    while stack and len(out) < NODES_DRAWN:
        sid = stack.pop()
        r = by_id[sid]
        out.append(
            {"id": sid, "mode": r["mode"], "subagent_type": r["subagent_type"],
             "depth": r["depth"], "turns": r["turns"], "children": r["children"]}
        )  # fmt: skip
        stack.extend(reversed(kids.get(sid, [])))
    return out, len(rows) - len(out)


def trace_agents(*, trace: Trace, drawn_trees: int = 3) -> TraceAgents:
    """Per tree and per agent (session) statistics of a stored trace, and its largest trees
    ready to draw. Loading a large file takes seconds: the result is cached by content."""
    key = f"trace-agents:v1:{trace.sha256}:{trace.format}:{drawn_trees}"
    cached = cache.get(key)
    if cached is not None:
        return cast(TraceAgents, cached)
    loaded = trace_loaded(trace_id=trace.uuid)
    trees: list[TreeRow] = []
    agents: list[AgentRow] = []
    rows_by_tree: dict[str, list[AgentRow]] = {}
    for tree in loaded.trees:
        rows = _agent_rows(tree)
        rows_by_tree[tree.id] = rows
        agents.extend(rows)
        trees.append(
            {
                "id": tree.id, "sessions": len(rows), "requests": tree.requests,
                "fork_children": sum(1 for r in rows if r["mode"] == "fork"),
                "spawn_children": sum(1 for r in rows if r["mode"] == "spawn"),
                "max_depth": max((r["depth"] for r in rows), default=0),
                "span_s": round(tree.span_s, 3),
                "input_tokens": sum(t.input_tokens for s in tree.sessions.values()
                                    for t in s.turns),
                "output_tokens": sum(r["output_tokens"] for r in rows),
            }
        )  # fmt: skip
    trees.sort(key=lambda t: (-t["sessions"], -t["requests"], t["id"]))
    agents.sort(key=lambda a: (-a["turns"], a["tree"], a["id"]))
    by_id = {tree.id: tree for tree in loaded.trees}
    drawn: dict[str, list[DrawnNode]] = {}
    cut: dict[str, int] = {}
    for row in trees[:drawn_trees]:
        drawn[row["id"]], cut[row["id"]] = _drawn(by_id[row["id"]], rows_by_tree[row["id"]])
    result: TraceAgents = {
        "trees": trees[:TREES_LISTED], "trees_total": len(trees),
        "agents": agents[:AGENTS_LISTED], "agents_total": len(agents),
        "drawn": drawn, "drawn_cut": cut,
    }  # fmt: skip
    cache.set(key, result, AGENTS_CACHE_S)
    return result
