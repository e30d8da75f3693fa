"""The WebSocket viewers this process serves, by consumer kind (`run`, `runs_list`): the live
consumers join on accept and leave on disconnect; `/metrics` reads the gauge. Per process, as
the sockets are."""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_viewers: Counter[str] = Counter()


class Viewer:
    """One counted socket; `leave` is idempotent (Channels may call disconnect twice)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.left = False
        with _lock:
            _viewers[kind] += 1

    def leave(self) -> None:
        with _lock:
            if not self.left:
                self.left = True
                _viewers[self.kind] -= 1


def viewer_join(kind: str) -> Viewer:
    return Viewer(kind)


def viewers_by_kind() -> dict[str, int]:
    with _lock:
        return dict(_viewers)
