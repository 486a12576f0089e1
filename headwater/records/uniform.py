"""Records sections whose records all share the first record's layout, recognized in C calls.

Producers of keyed events often send records that differ only in their bytes, not their shape:
keys of one length, values of one length, the same headers with values of one length, one
timestamp. Such a record is framing bytes around its payloads (the key, the value, each header's
key and value)::

    length | attributes timestampDelta | offsetDelta | keyLength | KEY | valueLength | VALUE |
    headerCount headerKeyLength | HEADER KEY | headerValueLength | HEADER VALUE | ...

and only ``length`` and ``offsetDelta`` change from record to record (``offsetDelta`` is the
record's index; ``length`` grows by a byte where the index's varint does). So from the first
record's layout, the framing of records 0..n-1 is known: their bytes, and where in the section
they must sit. A section is uniform when taking those places out of it (one ``itemgetter`` call)
and joining them gives those bytes, and its length is the layout's: no Python code runs per
record. Anything else is left to the record walk in ``validation.py``, which also checks the
first record before this is asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import cast

from headwater.errors import CorruptRecordError
from headwater.records.varint import encode_varint, read_varint

# Layout key: (attributes and timestampDelta bytes, framing after offsetDelta split at each
# payload, payload lengths).
_Layout = tuple[bytes, tuple[bytes, ...], tuple[int, ...]]
_LAYOUTS_KEPT = 4  # each holds a slice per framing piece of its longest batch yet
_GETTERS_KEPT = 8


@dataclass
class _Framing:
    """The framing of records 0..built-1 of one layout: places in the section, and bytes."""

    pieces_per_record: int
    slices: list[slice] = field(default_factory=list)
    joined: bytearray = field(default_factory=bytearray)
    joined_ends: list[int] = field(default_factory=lambda: [0])  # per record count
    section_ends: list[int] = field(default_factory=lambda: [0])  # per record count

    @property
    def built(self) -> int:
        return len(self.section_ends) - 1


_framings: dict[_Layout, _Framing] = {}
_getters: dict[tuple[_Layout, int], Callable[[bytes], tuple[bytes, ...]]] = {}


def first_record_end(section: bytes) -> int | None:
    """Where the section's first record ends by its length varint, if that is inside it."""
    try:
        length, start = read_varint(section, 0)
    except (IndexError, CorruptRecordError):
        return None
    end = start + length
    return end if length > 0 and end <= len(section) else None


def is_uniform_section(section: bytes, first_end: int, count: int) -> bool:
    """Whether ``section`` is ``count`` records all laid out as its first one, which ends at
    ``first_end`` and has been checked valid; False means only "not uniform"."""
    layout = _layout(section, first_end)
    if layout is None:
        return False
    framing = _framing(layout, count)
    if len(section) != framing.section_ends[count]:
        return False
    key = (layout, count)
    getter = _getters.get(key)
    if getter is None:
        pieces = framing.slices[: framing.pieces_per_record * count]
        getter = cast("Callable[[bytes], tuple[bytes, ...]]", itemgetter(*pieces))
        if len(_getters) >= _GETTERS_KEPT:
            _getters.clear()
        _getters[key] = getter
    taken = getter(section)
    joined = taken if isinstance(taken, bytes) else b"".join(taken)
    expected = framing.joined_ends[count]
    return len(joined) == expected and framing.joined.startswith(joined)


def _layout(section: bytes, end: int) -> _Layout | None:
    """The first record's layout (it is valid: the walk checked it)."""
    _length, i = read_varint(section, 0)
    head_start = i
    i += 1  # attributes
    _ts, i = read_varint(section, i)
    head = section[head_start:i]
    _offset, i = read_varint(section, i)
    segments: list[bytes] = []
    payloads: list[int] = []
    piece_start = i

    def payload(size: int) -> None:
        nonlocal i, piece_start
        if size > 0:
            segments.append(section[piece_start:i])
            payloads.append(size)
            i += size
            piece_start = i

    size, i = read_varint(section, i)
    payload(size)
    size, i = read_varint(section, i)
    payload(size)
    headers, i = read_varint(section, i)
    for _ in range(headers):
        size, i = read_varint(section, i)
        payload(size)
        size, i = read_varint(section, i)
        payload(size)
    if i != end:
        return None
    segments.append(section[piece_start:end])
    return head, tuple(segments), tuple(payloads)


def _framing(layout: _Layout, count: int) -> _Framing:
    framing = _framings.get(layout)
    if framing is None or framing.built < count:
        if len(_framings) >= _LAYOUTS_KEPT:
            _framings.clear()
            _getters.clear()
        built = 0 if framing is None else framing.built
        framing = _build(layout, max(count, 2 * built))
        _framings[layout] = framing
    return framing


def _build(layout: _Layout, count: int) -> _Framing:
    head, segments, payloads = layout
    first, *rest = segments
    # The record's bytes after its length varint, less the offsetDelta's varint.
    body = len(head) + sum(map(len, segments)) + sum(payloads)
    tail = [(gap, piece) for gap, piece in zip(payloads, rest, strict=True)]
    framing = _Framing(pieces_per_record=1 + sum(1 for _gap, piece in tail if piece))
    slices, joined = framing.slices, framing.joined
    at = 0
    for index in range(count):
        offset = encode_varint(index)
        lead = encode_varint(body + len(offset)) + head + offset + first
        slices.append(slice(at, at + len(lead)))
        joined += lead
        at += len(lead)
        for gap, piece in tail:
            at += gap
            if piece:
                slices.append(slice(at, at + len(piece)))
                joined += piece
                at += len(piece)
        framing.joined_ends.append(len(joined))
        framing.section_ends.append(at)
    return framing
