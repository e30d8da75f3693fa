"""What one credit sends: the chat request built from its trace turn and affinity decision.

Prompt text comes from the trace (literal messages, or text synthesized from hash ids); with
`isolate_trees` every prompt of a tree instance starts with that instance's marker, whichever
the source, so live lanes never share cache where the simulator keeps them apart. The marker
is a digest of the instance's root id and a salt drawn once per builder (per run): root ids
repeat from run to run, and without the salt a re-run, or the second run of an A/B pair, would
find the first run's prompts still in the server's prefix cache. For the same reason the
session ids affinity puts on the wire carry the salt too (a server keeps bindings for minutes).
Affinity is merged copy-on-write into the trace's own body keys. Pure: builds request objects,
never sends them, and keeps no per-tree state.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from runner.affinity.emitters import AffinityDecision, merge_nvext
from runner.client import ChatRequest, JsonSafeText
from runner.dynamo import SESSION_FINAL_HEADER
from runner.replay.engine import Dispatch
from runner.trace import Trace, Tree, instance_marker, render_messages, synthesize_prompt

__all__ = ["RequestBuilder"]


class RequestBuilder:
    def __init__(
        self,
        traces: Sequence[Trace],
        *,
        model: str,
        isolate_trees: bool = True,
        want_worker_id: bool = True,
        ignore_eos: bool = True,
        marker_salt: str | None = None,
    ) -> None:
        self.model = model
        # None: a fresh salt, so this run's trees are new users to the server (see above).
        self._salt = (uuid.uuid4().hex[:12] if marker_salt is None else marker_salt) + "/"
        self.isolate_trees = isolate_trees
        self.want_worker_id = want_worker_id
        self.ignore_eos = ignore_eos
        # Hash ids are scoped to their trace file: equal ids in one file are equal text.
        self._scopes: dict[int, str] = {}
        for trace in traces:
            scope = str(trace.meta.get("hash_scope") or trace.source)
            for tree in trace.trees:
                self._scopes[id(tree)] = scope

    @property
    def salt(self) -> str:
        """This run's salt (markers and affinity ids): a builder elsewhere given it (a
        client-worker host, `marker_salt`) builds the same bytes as this one."""
        return self._salt[:-1]

    def scope(self, tree: Tree) -> str:
        """What the tree's hash ids are scoped to (its trace file)."""
        return self._scopes.get(id(tree), tree.id)

    def build(self, dispatch: Dispatch) -> tuple[ChatRequest, Mapping[str, str]]:
        credit = dispatch.credit
        tree = credit.tree
        assert credit.turn is not None and tree is not None, "live credits carry their trace turn"
        return self.build_turn(
            tree,
            self._scopes.get(id(tree), tree.id),
            credit.template_id,
            credit.turn_index,
            root_id=credit.root_id,
            session_id=credit.session_id,
            priming=credit.priming,
            affinity=dispatch.affinity,
        )

    def build_turn(
        self,
        tree: Tree,
        scope: str,
        template_id: str,
        turn_index: int,
        *,
        root_id: str,
        session_id: str,
        priming: bool,
        affinity: AffinityDecision,
    ) -> tuple[ChatRequest, Mapping[str, str]]:
        """The request of turn `turn_index` of session template `template_id` of `tree`, for
        the tree instance `root_id` and its session `session_id`, with the routing decision's
        affinity: what `build` makes of a dispatch, from the names a credit carries over the
        fleet's wire (runner/fleet/wire.py), so a host builds what the orchestrator would."""
        turn = tree.sessions[template_id].turns[turn_index]
        marker = instance_marker(self._salt + root_id) if self.isolate_trees else None
        if turn.messages is not None:
            messages = render_messages(tree, template_id, turn_index)
            if marker is not None:
                _mark(messages, marker)
        else:
            text = synthesize_prompt(
                input_tokens=turn.input_tokens,
                hash_ids=turn.hash_ids,
                block_size=tree.block_size,
                scope=scope,
                request_key=f"{session_id}:{turn_index}",
                marker=marker,
            )
            # Pool words and instance_marker's `[rid:<hex>]`: nothing in it JSON-escapes
            # (tests/runner/client/test_json_safe_text.py), so the body takes it as it is.
            messages = [{"role": "user", "content": JsonSafeText(text)}]
        affinity = _salted(affinity, self._salt)
        extra = merge_nvext(turn.extra_body, affinity)
        request = ChatRequest(
            model=self.model,  # the endpoint's model, not the one the trace recorded
            messages=messages,
            max_tokens=1 if priming else max(1, turn.output_tokens),
            ignore_eos=self.ignore_eos,
            want_worker_id=self.want_worker_id,
            extra_body=extra or None,
        )
        return request, dict(affinity.headers)


def _salted(decision: AffinityDecision, salt: str) -> AffinityDecision:
    """The decision with this run's ids on the wire: session ids repeat from run to run, and a
    server keeps affinity bindings for minutes (Dynamo's TTL), so a re-run would otherwise find
    its sessions pinned where the previous run left them. Inside the engine keys stay bare."""
    if decision.key is None:
        return decision
    control = decision.session_control
    if control is not None:
        control = {**control, "session_id": salt + str(control["session_id"])}
    headers = tuple(
        (name, value if name == SESSION_FINAL_HEADER else salt + value)
        for name, value in decision.headers
    )
    return AffinityDecision(decision.key, decision.action, control, headers)


_WORD = re.compile(r"\S+")


def _mark(messages: list[dict[str, Any]], marker: str) -> None:
    """Swap the first word of the conversation's text for `marker`, in place.

    The same rule as synthesized prompts: one word for one word, so the token count the trace
    recorded (`runner.trace.tokens`) still holds. `messages` are fresh copies from
    `render_messages`; a content-part list is shared with the trace, so it is copied first.
    """
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            swapped = _swap_first_word(content, marker)
            if swapped is not None:
                message["content"] = swapped
                return
        elif isinstance(content, list):
            for index, part in enumerate(content):
                if not (isinstance(part, Mapping) and part.get("type") == "text"):
                    continue
                text = part.get("text")
                swapped = _swap_first_word(text, marker) if isinstance(text, str) else None
                if swapped is not None:
                    parts = list(content)
                    parts[index] = {**part, "text": swapped}
                    message["content"] = parts
                    return


def _swap_first_word(text: str, marker: str) -> str | None:
    match = _WORD.search(text)
    if match is None:
        return None
    return text[: match.start()] + marker + text[match.end() :]
