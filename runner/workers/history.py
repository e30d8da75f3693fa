"""Session histories held as shared pieces: what a client worker really keeps of each session.

A client worker keeps, for every session it served, the history it last sent (the request
body) until the session's final turn is answered there. Held as text, every copy costs its
whole history, although the sessions of a tree, and the turns of one session, share most of
it: at Claude Code sizes (a 140k-token prompt is about 600 kB of body) a few thousand copies
are gigabytes.

Here a history is a tuple of references to pieces: the body cut into fixed `PIECE_BYTES`
pieces from its first byte, each piece interned in its store (one object per distinct piece,
reference-counted, freed with its last holder). Two bodies that share a prefix share every
whole piece of it, wherever they came from (a tree's common prefix, a session's earlier turn,
the same tree replayed on another lane, literal or synthesized prompts alike); a copy costs
its tuple and the pieces only it holds. Reassembling a body (`text`) joins its pieces.

The store keeps both figures for every copy: its logical bytes (its length: what holding it
as text costs, the figure the books have always shown) and, on demand, its own bytes (what
dropping it would free). Orphaned copies (sessions whose latest turn went to another worker,
the leak legacy routing causes) stay counted and measured both ways. Keeps books only; sends
nothing, decides nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

__all__ = ["PIECE_BYTES", "HistoryStore", "SessionHistories", "StoreFigures"]

# Small enough that a shared prefix loses at most one piece at its end, large enough that the
# tuple of references (8 bytes a piece) is 0.2 % of the text it stands for.
PIECE_BYTES = 4096

_TUPLE_BASE = sys.getsizeof(())
_BYTES_BASE = sys.getsizeof(b"")


def _tuple_size(n: int) -> int:
    return _TUPLE_BASE + 8 * n


@dataclass(slots=True)
class StoreFigures:
    copies: int = 0
    logical_bytes: int = 0  # every copy as whole text: the sum of their lengths
    actual_bytes: int = 0  # what the store holds: pieces once, plus each copy's references
    own_bytes: int = 0  # sum over copies of what dropping that copy alone would free
    orphans: int = 0
    orphan_logical_bytes: int = 0
    orphan_own_bytes: int = 0


class _Slot:
    __slots__ = ("piece", "refs")

    def __init__(self, piece: bytes) -> None:
        self.piece = piece
        self.refs = 1


@dataclass(slots=True)
class HistoryStore:
    """Interned pieces with reference counts; histories are tuples of them."""

    piece_bytes: int = PIECE_BYTES
    _pieces: dict[bytes, _Slot] = field(default_factory=dict)  # a piece -> its one object
    held_bytes: int = 0  # pieces' object sizes (each once) + the histories' tuples

    def hold(self, body: bytes, like: tuple[bytes, ...] | None = None) -> tuple[bytes, ...]:
        """`body` as a history of shared pieces (the caller keeps the tuple, then `release`s
        it once). `like`: a history still held that probably shares a prefix with `body`
        (the session's previous turn, or the latest of its tree): its pieces are compared in
        place (`startswith`, no copy) and reused with the hash each bytes object caches, so
        only what is new gets cut and hashed. A plain dict of pieces hashed every byte of a
        600 kB body (1.4 ms a request)."""
        pieces = self._pieces
        size = self.piece_bytes
        out: list[bytes] = []
        at = 0
        if like:
            for chunk in like:
                if len(chunk) != size or not body.startswith(chunk, at):
                    break
                pieces[chunk].refs += 1
                out.append(chunk)
                at += size
        held = 0
        for start in range(at, len(body), size):
            chunk = body[start : start + size]
            slot = pieces.get(chunk)
            if slot is None:
                pieces[chunk] = _Slot(chunk)
                held += sys.getsizeof(chunk)
                out.append(chunk)
            else:
                slot.refs += 1
                out.append(slot.piece)
        history = tuple(out)
        self.held_bytes += held + _tuple_size(len(history))
        return history

    def release(self, history: tuple[bytes, ...]) -> None:
        pieces = self._pieces
        freed = _tuple_size(len(history))
        for chunk in history:
            slot = pieces[chunk]
            slot.refs -= 1
            if not slot.refs:
                del pieces[chunk]
                freed += sys.getsizeof(chunk)
        self.held_bytes -= freed

    def own_bytes(self, history: tuple[bytes, ...]) -> int:
        """What dropping this history alone would free: its tuple and the pieces only it
        holds (a piece it holds twice counts as its own)."""
        pieces = self._pieces
        own = _tuple_size(len(history))
        seen: dict[bytes, int] = {}
        for chunk in history:
            seen[chunk] = seen.get(chunk, 0) + 1
        for chunk, times in seen.items():
            if pieces[chunk].refs == times:
                own += sys.getsizeof(chunk)
        return own

    @property
    def pieces(self) -> int:
        return len(self._pieces)

    @staticmethod
    def text(history: tuple[bytes, ...]) -> bytes:
        return b"".join(history)


class SessionHistories:
    """The copies K client workers hold in one process, each worker's copy of a session
    being the body it last sent for it, over one store (a process's memory is shared by its
    workers). A copy stays until that worker answers the session's final turn; copies left
    on other workers are orphans, and stay (the leak is measured, not hidden)."""

    def __init__(self, *, piece_bytes: int = PIECE_BYTES) -> None:
        self.store = HistoryStore(piece_bytes=piece_bytes)
        # (worker, session) -> (history, logical bytes)
        self._copies: dict[tuple[int, str], tuple[tuple[bytes, ...], int]] = {}
        self._latest: dict[str, int] = {}  # session -> the worker that sent its latest turn
        self._holders: dict[str, set[int]] = {}
        # Tree instance -> its latest copy's key (a hint only: the copy may be gone).
        self._family: dict[str, tuple[int, str]] = {}
        self.logical_bytes = 0
        self.peak_logical_bytes = 0
        self.peak_actual_bytes = 0

    def sent(self, worker: int, session_id: str, body: bytes, family: str | None = None) -> None:
        """Worker `worker` sent `body` for `session_id`: its copy is now that body. `family`
        (the tree instance) names where else a shared prefix is likely (see `hold`)."""
        key = (worker, session_id)
        old = self._copies.get(key)
        like = old
        if like is None and family is not None:
            latest = self._family.get(family)
            like = self._copies.get(latest) if latest is not None else None
        # Before releasing the old copy: the pieces it shares with the new one stay.
        history = self.store.hold(body, like[0] if like is not None else None)
        if family is not None:
            self._family[family] = key
        if old is not None:
            self.store.release(old[0])
            self.logical_bytes -= old[1]
        self._copies[key] = (history, len(body))
        self.logical_bytes += len(body)
        self._latest[session_id] = worker
        self._holders.setdefault(session_id, set()).add(worker)
        if self.logical_bytes > self.peak_logical_bytes:
            self.peak_logical_bytes = self.logical_bytes
        if self.store.held_bytes > self.peak_actual_bytes:
            self.peak_actual_bytes = self.store.held_bytes

    def ended(self, worker: int, session_id: str) -> None:
        """The session's final turn was answered on `worker`: that copy is freed (copies on
        other workers stay: orphans)."""
        self._drop(worker, session_id)
        if not self._holders.get(session_id):
            self._holders.pop(session_id, None)
            self._latest.pop(session_id, None)

    def drop_worker(self, worker: int) -> None:
        for key in [k for k in self._copies if k[0] == worker]:
            self._drop(*key)

    def _drop(self, worker: int, session_id: str) -> None:
        old = self._copies.pop((worker, session_id), None)
        if old is None:
            return
        self.store.release(old[0])
        self.logical_bytes -= old[1]
        holders = self._holders.get(session_id)
        if holders is not None:
            holders.discard(worker)

    def held(self, worker: int, session_id: str) -> bytes | None:
        copy = self._copies.get((worker, session_id))
        return None if copy is None else HistoryStore.text(copy[0])

    def figures(self, workers: int | None = None) -> list[StoreFigures]:
        """Per worker: copies, logical and own bytes, orphans (O(pieces held): at report
        time, not per request). `actual_bytes` of a worker charges each piece to the copies
        holding it, shared evenly, so the workers' figures add up to the store's."""
        if workers is None:
            workers = 1 + max((w for w, _ in self._copies), default=-1)
        count = workers
        out = [StoreFigures() for _ in range(count)]
        store = self.store
        refs = store._pieces
        for (worker, session_id), (history, logical) in self._copies.items():
            if worker >= count:
                out.extend(StoreFigures() for _ in range(worker + 1 - count))
                count = worker + 1
            f = out[worker]
            own = store.own_bytes(history)
            share: float = _tuple_size(len(history))
            for chunk in history:
                share += sys.getsizeof(chunk) / refs[chunk].refs
            f.copies += 1
            f.logical_bytes += logical
            f.own_bytes += own
            f.actual_bytes += round(share)
            if self._latest.get(session_id) != worker:
                f.orphans += 1
                f.orphan_logical_bytes += logical
                f.orphan_own_bytes += own
        return out

    def totals(self) -> dict[str, int]:
        per = self.figures()
        return {
            "copies": sum(f.copies for f in per),
            "logical_bytes": self.logical_bytes,
            "actual_bytes": self.store.held_bytes,
            "own_bytes": sum(f.own_bytes for f in per),
            "orphans": sum(f.orphans for f in per),
            "orphan_logical_bytes": sum(f.orphan_logical_bytes for f in per),
            "orphan_own_bytes": sum(f.orphan_own_bytes for f in per),
            "pieces": self.store.pieces,
            "peak_logical_bytes": self.peak_logical_bytes,
            "peak_actual_bytes": self.peak_actual_bytes,
        }
