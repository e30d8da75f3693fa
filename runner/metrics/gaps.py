"""A request's inter-chunk gaps, stored compactly: little-endian uint32 microseconds.

A streamed answer's chunks arrive at `chunk_times_s`; the gaps between consecutive arrivals
are the run's inter-chunk samples (the summary's `inter_chunk_ms`). A record keeps them as
bytes, 4 a gap: each gap rounded to the microsecond, packed as a little-endian uint32
(at most 4,294 s a gap; longer ones are clamped, which no stream's read timeout allows).
Record files carry them as base64 text (`chunk_gaps_us`), the service as a bytea column.

Why fixed-width and not a delta-varint: gaps are not monotonic, so deltas do not shrink
them, and a varint would save about a third of the bytes (most gaps fit in 2-3 bytes) but
must be decoded one byte at a time in Python; `array('I').frombytes` decodes a record's
gaps in one C call, so `verify` reads a million records' samples at the speed of the JSON
parse. Microseconds are the unit because the summary's histogram is within 0.54 % of the
exact order statistic: rounding to 0.5 us is below that for every gap above 0.1 ms, and the
run's histogram is fed the rounded values, so records and summary hold the same samples.
"""

from __future__ import annotations

import base64
import binascii
import sys
from array import array
from collections.abc import Sequence
from typing import Final

__all__ = [
    "GAP_BYTES",
    "decode_gaps",
    "encode_gaps",
    "gaps_from_text",
    "gaps_ms",
    "gaps_to_text",
]

GAP_BYTES: Final = 4
_MAX_US: Final = 2**32 - 1
_BIG_ENDIAN: Final = sys.byteorder == "big"
if array("I").itemsize != GAP_BYTES:  # pragma: no cover - every platform we run on
    raise ImportError("array('I') is not 4 bytes here")


def encode_gaps(chunk_times_s: Sequence[float]) -> bytes:
    """The gaps between consecutive `chunk_times_s` (seconds), packed; b"" for < 2 chunks."""
    out = array("I")
    previous_us = None
    for t in chunk_times_s:
        # Rounded times, then differences: the gaps sum to the rounded span exactly.
        now_us = round(t * 1e6)
        if previous_us is not None:
            out.append(min(_MAX_US, max(0, now_us - previous_us)))
        previous_us = now_us
    if _BIG_ENDIAN:
        out.byteswap()
    return out.tobytes()


def decode_gaps(data: bytes) -> array[int]:
    """`encode_gaps`' bytes as microseconds (an array of uint32, 4 bytes a sample)."""
    if len(data) % GAP_BYTES:
        raise ValueError(f"chunk gaps must be a multiple of {GAP_BYTES} bytes, got {len(data)}")
    out = array("I")
    out.frombytes(data)
    if _BIG_ENDIAN:
        out.byteswap()
    return out


def gaps_ms(data: bytes) -> list[float]:
    """The gaps in milliseconds (what the summary's histogram is fed)."""
    return [us / 1000.0 for us in decode_gaps(data)]


def gaps_to_text(data: bytes) -> str:
    """The record file's form: base64 (4/3 of the bytes)."""
    return base64.b64encode(data).decode("ascii")


def gaps_from_text(text: str) -> bytes:
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("chunk_gaps_us must be base64 text") from None
    if len(data) % GAP_BYTES:
        raise ValueError(f"chunk gaps must be a multiple of {GAP_BYTES} bytes, got {len(data)}")
    return data
