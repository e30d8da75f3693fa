"""Seeded synthetic agentic traces shaped like coding agents (Claude Code–style trees).

Owns `SyntheticConfig` (validated, frozen, every default documented) and `generate_synthetic`,
which builds trees of a long main chain whose context grows turn by turn, bursts of parallel
SPAWN subagents sharing a large system prefix among siblings, and occasional FORK children
that inherit their parent's context. The same config and seed always give the same trace.
Times are nominal (`runner.trace.timing`); it never reads files or clocks.

Defaults come from `weka_claude_code/trace_0282.json`: a main chain of ~50 turns starting at
~16.7k prompt tokens and growing by a few thousand per turn (so most blocks are reused turn to
turn), Explore subagents starting at ~9k tokens with a shared ~9k-token prefix, 2–4 at once,
14–22 turns each, 100–1000 output tokens. Think times are cut to a few seconds so that 256
lanes at 1–3 s request latency issue well over 100,000 requests per simulated hour.
"""

from __future__ import annotations

import dataclasses
import math
import random
import threading
from dataclasses import dataclass, field
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runner.errors import Stopped
from runner.limits import MAX_SYNTHETIC_BLOCKS, MAX_SYNTHETIC_REQUESTS
from runner.trace.build import SessionDraft, assemble_trees, content_scope
from runner.trace.model import Branch, BranchMode, Trace, TraceFormat, Tree, Turn
from runner.trace.timing import with_nominal_times

__all__ = ["SyntheticConfig", "generate_synthetic"]

# Ranges are (lo, hi) pairs; each kind has its ceiling, so that no product of knobs can ask
# for more than a worker holds (and the JSON Schema says so). Output and tool results are
# per turn; contexts are capped by max_context_tokens besides.
_Turns = Annotated[int, Field(ge=0, le=1_000)]
_Fanout = Annotated[int, Field(ge=0, le=64)]
_Tokens = Annotated[int, Field(ge=0, le=1_000_000)]
_OutputTokens = Annotated[int, Field(ge=0, le=131_072)]
_Range = tuple[int, int]
_TOOL_RESULT_MAX_TOKENS = 32_000  # one tool result, as the generator clamps it
_SIGMA_MAX = 4.0  # log-normal spread: exp(4 sigma) already spans nine orders of magnitude


class SyntheticConfig(BaseModel):
    """Knobs of the synthetic agentic generator. Ranges are inclusive (lo, hi), drawn uniformly
    unless a median says otherwise; medians are of log-normal draws."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    trees: int = Field(default=32, ge=1, le=100_000, description="agent trees to generate")
    block_size: int = Field(default=64, gt=0, le=65_536, description="tokens per hash id")

    # Main agent (the root session).
    main_turns: tuple[_Turns, _Turns] = Field(
        default=(20, 60), description="turns of the main chain"
    )
    main_system_tokens: tuple[_Tokens, _Tokens] = Field(
        default=(14_000, 18_000), description="tools + system prompt before the first message"
    )
    common_prefix_tokens: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="leading system tokens identical in every tree (one agent's tool "
        "definitions across users); visible only when replay markers are off",
    )
    first_prompt_tokens: tuple[_Tokens, _Tokens] = Field(default=(200, 2_000))
    tool_result_median_tokens: int = Field(
        default=2_000,
        ge=1,
        le=1_000_000,
        description="context growth per turn besides the previous reply (one result is "
        "clamped to 32,000 tokens)",
    )
    tool_result_sigma: float = Field(default=1.0, ge=0, le=_SIGMA_MAX)
    max_context_tokens: int = Field(
        default=160_000,
        ge=1,
        le=10_000_000,
        description="past this the agent compacts its context",
    )
    compacted_tokens: int = Field(
        default=20_000,
        ge=0,
        le=1_000_000,
        description="summary that replaces the history on compaction",
    )
    output_tokens: tuple[_OutputTokens, _OutputTokens] = Field(default=(100, 1_000))
    output_median_tokens: int = Field(default=300, ge=1, le=131_072)
    think_time_median_s: float = Field(
        default=3.0, ge=0, le=3_600, description="end-to-start gap on the main chain"
    )
    think_time_sigma: float = Field(default=0.6, ge=0, le=_SIGMA_MAX)
    max_think_time_s: float = Field(default=30.0, ge=0, le=86_400)

    # SPAWN subagents (Explore-style, fresh context).
    spawn_probability: float = Field(
        default=0.08, ge=0, le=1, description="chance a main-chain turn spawns a group"
    )
    spawn_fanout: tuple[_Fanout, _Fanout] = Field(
        default=(2, 4), description="subagents per spawn group"
    )
    subagent_turns: tuple[_Turns, _Turns] = Field(default=(5, 25))
    subagent_prefix_tokens: tuple[_Tokens, _Tokens] = Field(
        default=(9_000, 11_000), description="system prefix shared by all subagents of a tree"
    )
    subagent_task_tokens: tuple[_Tokens, _Tokens] = Field(default=(100, 600))
    subagent_tool_result_median_tokens: int = Field(default=2_500, ge=1, le=1_000_000)
    subagent_think_time_median_s: float = Field(default=2.0, ge=0, le=3_600)
    subagent_type: str = Field(default="Explore", max_length=200)

    # FORK children (inherit the parent's context).
    fork_probability: float = Field(
        default=0.03, ge=0, le=1, description="chance a main-chain turn forks a child"
    )
    fork_turns: tuple[_Turns, _Turns] = Field(default=(1, 4))
    fork_prompt_tokens: tuple[_Tokens, _Tokens] = Field(default=(50, 500))

    # Shape.
    max_depth: int = Field(default=2, ge=0, le=16, description="0: roots only")
    child_branch_factor: float = Field(
        default=0.1, ge=0, le=1, description="children branch with this share of the odds"
    )
    join_strict_probability: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="chance a spawn group gates the parent's next turn; else background",
    )

    @model_validator(mode="after")
    def _ranges_are_ordered(self) -> Self:
        for name, value in self:
            if isinstance(value, tuple):
                lo, hi = value
                if not 0 <= lo <= hi:
                    raise ValueError(f"{name} must be a range 0 <= lo <= hi, got {value}")
        for name in ("main_turns", "subagent_turns", "fork_turns", "spawn_fanout"):
            if getattr(self, name)[0] < 1:
                raise ValueError(f"{name} must start at 1 or more")
        if self.output_tokens[0] < 1:
            raise ValueError("output_tokens must start at 1 or more")
        if self.common_prefix_tokens > self.main_system_tokens[0]:
            raise ValueError("common_prefix_tokens cannot exceed main_system_tokens")
        requests, blocks = self.estimated_size()
        if requests > MAX_SYNTHETIC_REQUESTS:
            raise ValueError(
                f"about {requests:,.0f} requests = {self.trees} trees x "
                f"~{requests / self.trees:,.0f}, over {MAX_SYNTHETIC_REQUESTS:,} "
                "(AIPERF_MAX_SYNTHETIC_REQUESTS): fewer trees, turns or subagents"
            )
        if requests * blocks > MAX_SYNTHETIC_BLOCKS:
            per_tree = requests / self.trees
            # Short enough for one line of a form (messages are cut at 200 characters).
            raise ValueError(
                f"about {requests * blocks:,.0f} prompt blocks = {self.trees} trees x "
                f"~{per_tree:,.0f} requests x ~{blocks:,.0f} blocks, over "
                f"{MAX_SYNTHETIC_BLOCKS:,} (AIPERF_MAX_SYNTHETIC_BLOCKS): fewer trees, turns "
                "or subagents"
            )
        return self

    def estimated_size(self) -> tuple[float, float]:
        """(requests, prompt blocks per request) the generator is expected to produce, from
        the knobs alone, before generating: the mean turns of each session kind, the expected
        children per turn down to max_depth, and the main chain's mean context (capped by
        compaction). Errs high (by 1.5-3x against generated traces), never low by much."""

        def mean(bounds: _Range) -> float:
            return (bounds[0] + bounds[1]) / 2

        turns = {
            "main": mean(self.main_turns),
            "subagent": mean(self.subagent_turns),
            "fork": mean(self.fork_turns),
        }

        def requests(kind: str, depth: int) -> float:
            if depth >= self.max_depth:
                return turns[kind]
            odds = 1.0 if depth == 0 else self.child_branch_factor
            children = self.spawn_probability * mean(self.spawn_fanout) * requests(
                "subagent", depth + 1
            ) + self.fork_probability * requests("fork", depth + 1)
            return turns[kind] * (1.0 + odds * children)

        spread = math.exp(self.tool_result_sigma**2 / 2)  # a log-normal's mean over its median
        lo, hi = self.output_tokens
        output = max(lo, min(hi, self.output_median_tokens))

        def context(start: float, turns: float, tool_median: int) -> float:
            # Mean over a session of a context growing turn by turn until compaction (which
            # never takes it below its start: the system prompt stays).
            growth = min(_TOOL_RESULT_MAX_TOKENS, tool_median * spread) + output
            return min(max(self.max_context_tokens, start), start + (turns - 1) / 2 * growth)

        main = context(
            mean(self.main_system_tokens) + mean(self.first_prompt_tokens),
            turns["main"],
            self.tool_result_median_tokens,
        )
        subagent = context(
            mean(self.subagent_prefix_tokens) + mean(self.subagent_task_tokens),
            turns["subagent"],
            self.subagent_tool_result_median_tokens,
        )
        blocks = max(main, subagent) / self.block_size
        return self.trees * requests("main", 0), max(1.0, blocks)


@dataclass(slots=True)
class _Context:
    """A prompt as (full-block hash ids, token count); the partial tail is unhashed."""

    ids: list[int]
    tokens: int = 0

    def copy(self) -> _Context:
        return _Context(list(self.ids), self.tokens)


@dataclass(slots=True)
class _Gen:
    config: SyntheticConfig
    rng: random.Random
    tree_no: int
    next_id: list[int]  # shared counter so hash ids never collide across trees
    common: _Context
    stop: threading.Event | None = None
    drafts: list[SessionDraft] = field(default_factory=list)
    subagent_prefix: _Context | None = None
    sessions_made: int = 0

    # -- draws -------------------------------------------------------------------------
    def uniform(self, bounds: _Range) -> int:
        return self.rng.randint(bounds[0], bounds[1])

    def lognormal(self, median: float, sigma: float) -> float:
        return median * math.exp(sigma * self.rng.gauss(0.0, 1.0))

    def think_s(self, median: float) -> float:
        c = self.config
        return round(min(c.max_think_time_s, self.lognormal(median, c.think_time_sigma)), 3)

    def output(self) -> int:
        lo, hi = self.config.output_tokens
        drawn = round(self.lognormal(self.config.output_median_tokens, 0.5))
        return max(lo, min(hi, drawn))

    def tool_result(self, median: int) -> int:
        return max(16, min(32_000, round(self.lognormal(median, self.config.tool_result_sigma))))

    # -- contexts ----------------------------------------------------------------------
    def extend(self, ctx: _Context, tokens: int) -> None:
        block = self.config.block_size
        before = ctx.tokens // block
        ctx.tokens += tokens
        # Every completed block is new content, even one that finishes a partial block.
        first = self.next_id[0] + 1
        self.next_id[0] += ctx.tokens // block - before
        ctx.ids.extend(range(first, self.next_id[0] + 1))

    def fresh(self, tokens: int, base: _Context | None = None) -> _Context:
        ctx = base.copy() if base is not None else _Context([])
        self.extend(ctx, tokens)
        return ctx

    def new_id(self, kind: str) -> str:
        self.sessions_made += 1
        return f"syn{self.tree_no}-{kind}{self.sessions_made}"

    # -- sessions ----------------------------------------------------------------------
    def session(
        self,
        sid: str,
        *,
        depth: int,
        ctx: _Context,
        system: _Context,
        turns: int,
        first_delay_s: float,
        think_median_s: float,
        tool_median: int,
        subagent_type: str | None,
    ) -> None:
        c = self.config
        draft = SessionDraft(id=sid, turns=[], subagent_type=subagent_type)
        self.drafts.append(draft)
        odds = 1.0 if depth == 0 else c.child_branch_factor
        prev_output = 0
        for k in range(turns):
            # Per turn, not per tree: one tree may hold most of the workload (a few
            # microseconds a turn, so a set stop is met within milliseconds).
            if self.stop is not None and self.stop.is_set():
                raise Stopped(
                    "while generating the synthetic workload, at tree "
                    f"{self.tree_no + 1:,} of {c.trees:,}"
                )
            if k:
                self.extend(ctx, prev_output + self.tool_result(tool_median))
                if ctx.tokens > c.max_context_tokens:
                    ctx = self.fresh(c.compacted_tokens, system)
            output = self.output()
            branches: list[Branch] = []
            if depth < c.max_depth:
                if self.rng.random() < c.spawn_probability * odds:
                    branches.append(self.spawn_group(depth, k, turns))
                if self.rng.random() < c.fork_probability * odds:
                    branches.append(self.fork(depth, ctx, output))
            draft.turns.append(
                Turn(
                    index=k,
                    input_tokens=ctx.tokens,
                    output_tokens=output,
                    hash_ids=tuple(ctx.ids),
                    delay_s=first_delay_s if k == 0 else self.think_s(think_median_s),
                    branches=tuple(branches),
                )
            )
            prev_output = output

    def spawn_group(self, depth: int, turn: int, turns: int) -> Branch:
        c = self.config
        if self.subagent_prefix is None:
            self.subagent_prefix = self.fresh(self.uniform(c.subagent_prefix_tokens))
        children = []
        for _ in range(self.uniform(c.spawn_fanout)):
            sid = self.new_id("sa")
            children.append(sid)
            self.session(
                sid,
                depth=depth + 1,
                ctx=self.fresh(self.uniform(c.subagent_task_tokens), self.subagent_prefix),
                system=self.subagent_prefix,
                turns=self.uniform(c.subagent_turns),
                first_delay_s=self.think_s(c.subagent_think_time_median_s),
                think_median_s=c.subagent_think_time_median_s,
                tool_median=c.subagent_tool_result_median_tokens,
                subagent_type=c.subagent_type,
            )
        strict = turn + 1 < turns and self.rng.random() < c.join_strict_probability
        return Branch(
            mode=BranchMode.SPAWN, children=tuple(children), join_turn=turn + 1 if strict else None
        )

    def fork(self, depth: int, ctx: _Context, output: int) -> Branch:
        c = self.config
        child_ctx = ctx.copy()
        # The child inherits the whole conversation, the declaring turn's reply included.
        self.extend(child_ctx, output + self.uniform(c.fork_prompt_tokens))
        sid = self.new_id("fk")
        self.session(
            sid,
            depth=depth + 1,
            ctx=child_ctx,
            system=child_ctx.copy(),
            turns=self.uniform(c.fork_turns),
            first_delay_s=self.think_s(c.think_time_median_s),
            think_median_s=c.think_time_median_s,
            tool_median=c.tool_result_median_tokens,
            subagent_type=None,
        )
        return Branch(mode=BranchMode.FORK, children=(sid,))

    def tree(self) -> Tree:
        c = self.config
        system = self.fresh(
            self.uniform(c.main_system_tokens) - c.common_prefix_tokens, self.common
        )
        root = f"syn{self.tree_no}-main"
        self.session(
            root,
            depth=0,
            ctx=self.fresh(self.uniform(c.first_prompt_tokens), system),
            system=system,
            turns=self.uniform(c.main_turns),
            first_delay_s=0.0,
            think_median_s=c.think_time_median_s,
            tool_median=c.tool_result_median_tokens,
            subagent_type=None,
        )
        (tree,) = assemble_trees(
            self.drafts,
            source="synthetic",
            block_size=c.block_size,
            timestamped=True,
            root_ids=[root],
            tree_ids={root: f"syn{self.tree_no}"},
        )
        return tree


def generate_synthetic(
    config: SyntheticConfig | None = None, *, stop: threading.Event | None = None
) -> Trace:
    """A synthetic agentic trace for `config` (default `SyntheticConfig()`). Raises Stopped
    as soon as `stop` (set from another thread) is seen: a workload near the size cap takes
    tens of seconds to generate, and a cancelled run must not wait for it.

    The shape of tree i depends only on (seed, i), so asking for more trees extends the same
    trace; hash ids are numbered across the trace so trees never share blocks by accident.
    Times are laid out nominally and the trees are marked timestamped (the nominal clock
    stands in for a recording).
    """
    cfg = config or SyntheticConfig()
    next_id = [0]
    common = _Context([])
    if cfg.common_prefix_tokens:
        _Gen(cfg, random.Random(0), -1, next_id, common).extend(common, cfg.common_prefix_tokens)
    trees = []
    for i in range(cfg.trees):
        gen = _Gen(cfg, random.Random(f"synthetic/{cfg.seed}/{i}"), i, next_id, common, stop)
        trees.append(dataclasses.replace(with_nominal_times(gen.tree()), timestamped=True))
    return Trace(
        format=TraceFormat.SYNTHETIC,
        source=f"synthetic(seed={cfg.seed})",
        trees=tuple(trees),
        meta={
            # The ids are numbered per config, so the config (seed included) is the scope.
            "hash_scope": content_scope(cfg.model_dump_json()),
            "config": cfg.model_dump(mode="json"),
        },
    )
