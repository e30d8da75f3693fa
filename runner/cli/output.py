"""Printing results: one JSON object for machines, an aligned table for people."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["print_json", "print_table"]


def print_json(data: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, sort_keys=False) + "\n")


def print_table(data: Mapping[str, Any], *, title: str | None = None) -> None:
    lines: list[str] = []
    if title:
        lines.append(title)
    width = max((len(k) for k in data), default=0)
    for key, value in data.items():
        lines.append(f"  {key.ljust(width)}  {_fmt(value)}")
    sys.stdout.write("\n".join(lines) + "\n")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return "  ".join(f"{k}={_fmt(v)}" for k, v in value.items())
    return str(value)
