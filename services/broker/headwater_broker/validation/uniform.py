"""Records sections whose records all share the first record's layout, checked column by column.

Producers mostly send records that differ only in their bytes, not their shape: no key or keys
of one length, values of one length, the same headers, one timestamp (plain records, fixed-size
keyed events). Such a record is framing bytes around its payloads (the key, the value, each
header's key and value)::

    length | attributes timestampDelta | offsetDelta | keyLength | KEY | valueLength | VALUE |
    headerCount headerKeyLength | HEADER KEY | headerValueLength | HEADER VALUE | ...

and only ``length`` and ``offsetDelta`` change from record to record (``offsetDelta`` is the
record's index; ``length`` grows by a byte where the index's varint does). Within a run of
records whose index varints have one width (0-63, 64-8191, ...) every record has one size S, so
the i-th framing byte of all of them is ``run[i::S]``: one strided slice, compared with what it
must hold (a constant, or the index varints' i-th bytes). A section is uniform when every such
column matches and the runs fill it exactly: a few C calls per run, none per record. Anything
else is left to the record walk in ``validation.py``, which also checks the first record
(whose layout this copies) before this is asked.
"""

from __future__ import annotations

from headwater.errors import CorruptRecordError
from headwater.records.varint import encode_varint, read_varint

# (attributes and timestampDelta bytes, framing after offsetDelta split at each payload,
# payload lengths).
_Layout = tuple[bytes, tuple[bytes, ...], tuple[int, ...]]

# Per (varint width, byte): that byte of the varints of indexes lo, lo + 1, ... of the run of
# indexes of that width, as far as a batch has needed them.
_index_columns: dict[tuple[int, int], bytes] = {}


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
    head, segments, payloads = layout
    first, *rest = segments
    # Framing bytes after the offsetDelta, by their place in the record from there.
    tail: list[tuple[int, int]] = [(at, byte) for at, byte in enumerate(first)]
    at = len(first)
    for gap, piece in zip(payloads, rest, strict=True):
        at += gap
        tail.extend((at + k, byte) for k, byte in enumerate(piece))
        at += len(piece)
    body = len(head) + at  # a record's bytes after its length varint, less its offsetDelta
    start = index = 0
    while index < count:
        width = len(encode_varint(index))
        stop = min(count, _run_end(width))
        size = len(encode_varint(body + width)) + body + width
        n = stop - index
        run = section[start : start + size * n]
        if len(run) != size * n:
            return False
        lead = encode_varint(body + width) + head
        for k, byte in enumerate(lead):
            if run[k::size] != bytes((byte,)) * n:
                return False
        for k in range(width):
            if run[len(lead) + k :: size] != _index_column(width, k, index, n):
                return False
        after = len(lead) + width
        for k, byte in tail:
            if run[after + k :: size] != bytes((byte,)) * n:
                return False
        start += size * n
        index = stop
    return start == len(section)


def _run_end(width: int) -> int:
    """One past the last index whose zig-zag varint is ``width`` bytes."""
    return 1 << (7 * width - 1)


def _index_column(width: int, k: int, lo: int, n: int) -> bytes:
    """Byte ``k`` of the varints of indexes ``lo .. lo + n - 1`` (all ``width`` bytes long)."""
    first = 0 if width == 1 else _run_end(width - 1)
    column = _index_columns.get((width, k), b"")
    if len(column) < lo - first + n:
        end = min(_run_end(width), first + max(lo - first + n, 2 * len(column)))
        column = bytes(encode_varint(i)[k] for i in range(first, end))
        _index_columns[(width, k)] = column
    return column[lo - first : lo - first + n]


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
