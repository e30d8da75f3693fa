"""The inference workers a server names, as the small indices records and charts use.

Our mock and the simulated cluster number workers 0..N-1; a real Dynamo names them by 64-bit
instance ids (`nvext.worker_id.decode_worker_id`, e.g. 7587889476394836737), which would not
fit a signed 64-bit database column and would make per-worker arrays unreadable. Small numeric
ids are kept as they are; any other id gets the next index in order of first appearance, and
the run reports which server id each index stands for.
"""

from __future__ import annotations

__all__ = ["ServedIndex"]

_SMALL = 65536  # ids below are kept: they are already indices (mock, simulated cluster)


class ServedIndex:
    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self.labels: dict[int, str] = {}  # index -> the server's id, for renumbered workers
        self._next = 0

    def index(self, served: str | None) -> int | None:
        if served is None:
            return None
        known = self._index.get(served)
        if known is not None:
            return known
        if served.isdigit() and int(served) < _SMALL:
            index = int(served)
        else:
            while self._next in self.labels or str(self._next) in self._index:
                self._next += 1
            index = self._next
            self.labels[index] = served
        self._index[served] = index
        return index
