"""Records sections checked column-wise with numpy: the fast path of ``validation.py``.

A section whose records differ in layout (keys of varying length, say) cannot be checked by
strided slices (``uniform.py``). It is checked here in two phases instead: one tight loop reads
only the record-length varints, giving every record's start and end; then each field (the
timestampDelta, offsetDelta, key and value lengths, header count, each header's key and value
lengths) is decoded for all records at once, its varint bytes gathered by position, and checked
as ``validation._walk`` checks it. :func:`section_is_valid` only ever answers "valid" or "not
sure": anything it does not prove (a varint of more than nine bytes, a field outside its record,
many headers) returns False and the exact walk decides, so verdicts and error messages are the
walk's. numpy comes with the ``server`` extra; this module is imported only from the broker's
append path, never by the client.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from headwater.errors import CorruptRecordError
from headwater.records.varint import read_varint

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_MAX_HEADERS = 32  # more headers than this in one record: left to the exact walk
_VARINT_BYTES = 9  # 63 bits; longer varints are left to the exact walk

_Array = Any  # numpy arrays (numpy's stubs are optional in the client's type check)


def section_is_valid(data: bytes, count: int, base_timestamp: int) -> bool:
    """True when the records section ``data`` holds exactly ``count`` valid records (as
    ``validation._walk`` defines valid); False when it is not, or not proven here."""
    starts, ends = _frame(data, count)
    if starts is None:
        return False
    arr = np.frombuffer(data, dtype=np.uint8)
    pos = starts + 1  # after the attributes byte
    ts, pos = _varints(arr, pos, ends)
    if ts is None:
        return False
    low = max(_INT64_MIN - base_timestamp, _INT64_MIN)
    high = min(_INT64_MAX - base_timestamp, _INT64_MAX)
    if low > _INT64_MAX or high < _INT64_MIN:
        return False
    if not ((ts >= low) & (ts <= high)).all():
        return False
    offsets, pos = _varints(arr, pos, ends)
    if offsets is None or not (offsets == np.arange(count, dtype=np.int64)).all():
        return False
    for _field in range(2):  # key, then value: -1 (null) or a length within the record
        size, pos = _varints(arr, pos, ends)
        if size is None or not (size >= -1).all():
            return False
        pos = pos + np.maximum(size, 0)
    # The header count must be inside the record (the walk's "key and value overrun" check).
    headers, pos = _varints(arr, pos, ends)
    if headers is None or not (headers >= 0).all():
        return False
    most = int(headers.max()) if count else 0
    if most > _MAX_HEADERS:
        return False
    for j in range(most):
        some = headers > j
        sub_pos = pos[some]
        sub_ends = ends[some]
        size, sub_pos = _varints(arr, sub_pos, sub_ends)  # header key: not null
        if size is None or not (size >= 0).all():
            return False
        sub_pos = sub_pos + size
        size, sub_pos = _varints(arr, sub_pos, sub_ends)  # header value: -1 or a length
        if size is None or not (size >= -1).all():
            return False
        sub_pos = sub_pos + np.maximum(size, 0)
        pos[some] = sub_pos
    return bool((pos == ends).all())


def _frame(data: bytes, count: int) -> tuple[_Array | None, _Array]:
    """Starts (after the length varint) and ends of the ``count`` records filling ``data``, or
    (None, None) when they do not frame it exactly or a record is shorter than six bytes.

    The loop only hops from length varint to length varint, giving up on a negative length; the
    lengths are decoded again and checked (six bytes at the least) with numpy.
    """
    bounds = [0] * (count + 1)
    i = 0
    try:
        for index in range(count):
            bounds[index] = i
            b = data[i]
            if b < 0x80:
                if b & 1:  # a negative length
                    return None, None
                i += 1 + (b >> 1)
            else:
                c = data[i + 1]
                if c < 0x80:
                    if b & 1:
                        return None, None
                    i += 2 + ((b & 0x7F) >> 1 | c << 6)
                else:
                    length, i = read_varint(data, i)
                    if length < 0:
                        return None, None
                    i += length
    except (IndexError, CorruptRecordError):  # not proven: the exact walk reports it
        return None, None
    if i != len(data):
        return None, None
    bounds[count] = i
    edges = np.array(bounds, dtype=np.int64)
    heads, ends = edges[:-1], edges[1:]
    if not (heads < ends).all():  # every record forward of the one before
        return None, None
    lengths, starts = _varints(np.frombuffer(data, dtype=np.uint8), heads, ends)
    if lengths is None or not ((lengths >= 6) & (starts + lengths == ends)).all():
        return None, None
    return starts, ends


def _varints(arr: _Array, pos: _Array, ends: _Array) -> tuple[_Array | None, _Array]:
    """Zig-zag varints at ``pos`` (each within ``[pos, ends)``) and the positions after them;
    (None, pos) when one is longer than nine bytes or passes its record's end."""
    if len(pos) == 0:
        return np.zeros(0, dtype=np.int64), pos
    last = len(arr) - 1
    b = arr[np.minimum(pos, last)]
    if (b < 0x80).all():
        if not (pos < ends).all():
            return None, pos
        z = b.astype(np.int64)
        return (z >> 1) ^ -(z & 1), pos + 1
    value = (b & 0x7F).astype(np.uint64)
    width = np.ones(len(pos), dtype=np.int64)
    going = b >= 0x80
    for k in range(1, _VARINT_BYTES):
        b = arr[np.minimum(pos + k, last)]
        value |= np.where(going, (b & 0x7F).astype(np.uint64) << np.uint64(7 * k), 0).astype(
            np.uint64
        )
        width += going
        going = going & (b >= 0x80)
        if not going.any():
            break
    else:
        return None, pos
    after = pos + width
    if not (after <= ends).all():
        return None, pos
    z = value.view(np.int64)
    return (z >> 1) ^ -(z & 1), after
