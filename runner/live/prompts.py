"""What one credit sends: the chat request built from its trace turn and affinity decision.

Prompt text comes from the trace (literal messages, or text synthesized from hash ids with a
marker per tree instance); affinity is merged copy-on-write into the trace's own body keys.
Pure: builds request objects, never sends them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runner.affinity.emitters import merge_nvext
from runner.client import ChatRequest
from runner.replay.engine import Dispatch
from runner.trace import Trace, instance_marker, render_messages, synthesize_prompt

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
    ) -> None:
        self.model = model
        self.isolate_trees = isolate_trees
        self.want_worker_id = want_worker_id
        self.ignore_eos = ignore_eos
        # Hash ids are scoped to their trace file: equal ids in one file are equal text.
        self._scopes: dict[int, str] = {}
        for trace in traces:
            scope = str(trace.meta.get("hash_scope") or trace.source)
            for tree in trace.trees:
                self._scopes[id(tree)] = scope
        self._markers: dict[str, str] = {}

    def build(self, dispatch: Dispatch) -> tuple[ChatRequest, Mapping[str, str]]:
        credit = dispatch.credit
        turn = credit.turn
        tree = credit.tree
        assert turn is not None and tree is not None, "live credits carry their trace turn"
        if turn.messages is not None:
            messages = render_messages(tree, credit.template_id, credit.turn_index)
        else:
            marker = None
            if self.isolate_trees:
                marker = self._markers.get(credit.root_id)
                if marker is None:
                    marker = self._markers[credit.root_id] = instance_marker(credit.root_id)
            text = synthesize_prompt(
                input_tokens=turn.input_tokens,
                hash_ids=turn.hash_ids,
                block_size=tree.block_size,
                scope=self._scopes.get(id(tree), tree.id),
                request_key=f"{credit.session_id}:{credit.turn_index}",
                marker=marker,
            )
            messages = [{"role": "user", "content": text}]
        extra = merge_nvext(turn.extra_body, dispatch.affinity)
        request = ChatRequest(
            model=self.model,  # the endpoint's model, not the one the trace recorded
            messages=messages,
            max_tokens=1 if credit.priming else max(1, turn.output_tokens),
            ignore_eos=self.ignore_eos,
            want_worker_id=self.want_worker_id,
            extra_body=extra or None,
        )
        return request, dict(dispatch.affinity.headers)

    def forget_tree(self, root_id: str) -> None:
        self._markers.pop(root_id, None)
