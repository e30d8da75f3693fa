"""Traces: the agent-tree model, loaders for every supported format, prompt synthesis, the
synthetic generator and trace statistics.

Public surface (everything else in the package is an implementation detail):

    load_trace(path, *, format=None, max_bytes=..., block_size=None) -> Trace
    parse_trace(text, *, source, format=None, block_size=None) -> Trace
    detect_format(path) -> TraceFormat
    dump_native(trace) -> str                       native JSON lines (see native_json_schema)
    generate_synthetic(config=None) -> Trace        with SyntheticConfig
    inspect_trace(trace) -> dict                    what `python -m runner inspect` prints
    count_tokens / count_message_tokens             the token contract shared with the mock server
    synthesize_prompt / instance_marker / synthesize_reply / render_messages

Loaders raise `runner.errors.TraceError` (file, line or JSON path, problem, fix).
"""

from runner.trace.load import (
    DEFAULT_MAX_BYTES,
    FILE_FORMATS,
    detect_format,
    load_trace,
    parse_trace,
)
from runner.trace.model import Branch, BranchMode, Session, Trace, TraceFormat, Tree, Turn
from runner.trace.native import dump_native, native_json_schema
from runner.trace.prompts import (
    instance_marker,
    render_messages,
    synthesize_prompt,
    synthesize_reply,
)
from runner.trace.stats import inspect_trace
from runner.trace.synthetic import SyntheticConfig, generate_synthetic
from runner.trace.timing import nominal_duration_s
from runner.trace.tokens import count_message_tokens, count_tokens

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FILE_FORMATS",
    "Branch",
    "BranchMode",
    "Session",
    "SyntheticConfig",
    "Trace",
    "TraceFormat",
    "Tree",
    "Turn",
    "count_message_tokens",
    "count_tokens",
    "detect_format",
    "dump_native",
    "generate_synthetic",
    "inspect_trace",
    "instance_marker",
    "load_trace",
    "native_json_schema",
    "nominal_duration_s",
    "parse_trace",
    "render_messages",
    "synthesize_prompt",
    "synthesize_reply",
]
