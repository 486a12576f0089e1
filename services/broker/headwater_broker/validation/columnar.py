"""Records sections checked column-wise with numpy: the fast path of ``validation.records``.

A section whose records differ in layout (keys of varying length, say) cannot be checked by
strided slices (``uniform.py``). It is checked here in two phases instead: one hop per record
along the length varints gives every record's start (``headwater.records.grammar.record_heads``);
then each field is read for all records at once (``headwater_kernel.record_columns``) and
checked as ``headwater.records.grammar.check_records`` checks it. :func:`section_is_valid` only
ever answers "valid" or "not sure": anything it does not prove (a varint longer than its field,
a field outside its record, many headers) returns False and the exact walk decides, so verdicts
and error messages are the walk's. numpy comes with the ``server`` extra; this module is
imported only from the broker's append path, never by the client.
"""

from __future__ import annotations

import numpy as np

from headwater.records.grammar import record_heads
from headwater_kernel.record_columns import VARINT_BYTES, record_columns, varints

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_MAX_HEADERS = 32  # more headers than this in one record: left to the exact walk


def section_is_valid(data: bytes, count: int, base_timestamp: int) -> bool:
    """True when the records section ``data`` holds exactly ``count`` valid records (as
    ``check_records`` defines valid); False when it is not, or not proven here."""
    heads: list[int] = []
    if not record_heads(data, 0, len(data), count, heads):
        return False
    u = np.frombuffer(data, dtype=np.uint8)
    columns = record_columns(u, np.array(heads, np.int64))
    if columns is None:
        return False
    ends = columns.ends
    if not (columns.lengths >= 6).all():  # attributes and five one-byte varints at the least
        return False
    low = max(_INT64_MIN - base_timestamp, _INT64_MIN)
    high = min(_INT64_MAX - base_timestamp, _INT64_MAX)
    ts = columns.timestamp_deltas
    if low > high or not ((ts >= low) & (ts <= high)).all():
        return False
    if not (columns.offset_deltas == np.arange(count, dtype=np.int64)).all():
        return False
    if not columns.well_framed().all():
        return False
    headers = columns.header_counts
    most = int(headers.max()) if count else 0
    if most > _MAX_HEADERS:
        return False
    pos = columns.headers_at.copy()
    for j in range(most):
        some = headers > j
        sub_pos = pos[some]
        sub_ends = ends[some]
        read = varints(u, sub_pos, sub_ends, VARINT_BYTES)  # header key: not null
        if read is None or not (read[0] >= 0).all():
            return False
        size, sub_pos = read
        read = varints(u, sub_pos + size, sub_ends, VARINT_BYTES)  # header value: -1 or a length
        if read is None or not (read[0] >= -1).all():
            return False
        size, sub_pos = read
        pos[some] = sub_pos + np.maximum(size, 0)
    return bool((pos == ends).all())
