"""The record grammar read column-wise: each field of every record of a section at once (numpy).

The layout is ``headwater.records.grammar``'s. Given where each record starts (its length
varint; :func:`~headwater.records.grammar.record_heads` finds them in one hop per record),
:func:`record_columns` reads each field (length, timestampDelta, offsetDelta, key and value
lengths, header count) for all records at once, gathering a varint's bytes by position, and
:func:`varints` reads any further varint column (the broker's check of header framing). Two
readers use it: the broker's column-wise check of records sections
(``headwater_broker.validation.columnar``) and the Spark job's Arrow decoder
(``headwater_spark.arrow_records``). numpy comes with the ``server`` and ``spark`` extras; the
client package (numpy-free by its import contract) never imports this module.

Nothing here raises on bad bytes: a varint longer than its field allows, or one that runs past
its record, makes the answer None, and the caller hands the section to the exact scalar walk,
whose error says what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Array = Any  # numpy arrays (numpy's stubs are optional in the client's type check)

VARINT_BYTES = 5  # the longest varint of an int32 field
VARLONG_BYTES = 10  # the longest varlong (timestampDelta)


@dataclass(slots=True)
class RecordColumns:
    """The fields of ``n`` records, each an int64 array of ``n``: positions are into the section
    the records were read from. Lengths are -1 for a null key or value."""

    lengths: Array
    ends: Array  # one past each record's last byte
    timestamp_deltas: Array
    offset_deltas: Array
    key_starts: Array
    key_lengths: Array
    value_starts: Array
    value_lengths: Array
    header_counts: Array
    headers_at: Array  # where each record's first header starts

    def well_framed(self) -> Array:
        """Per record: no negative lengths but null's -1, a header count that is not negative,
        and a record without headers ending right after its count."""
        return (
            (self.key_lengths >= -1)
            & (self.value_lengths >= -1)
            & (self.header_counts >= 0)
            & (self.headers_at <= self.ends)
            & ((self.header_counts != 0) | (self.headers_at == self.ends))
        )


def record_columns(u: Array, heads: Array) -> RecordColumns | None:
    """The fields of the records whose length varints start at ``heads`` in ``u`` (the section
    as uint8); None when a varint is too long for its field or runs past its record."""
    bound = np.full(len(heads), len(u), np.int64)
    read = varints(u, heads, bound, VARINT_BYTES)
    if read is None:
        return None
    lengths, at = read
    ends = at + lengths
    read = varints(u, at + 1, ends, VARLONG_BYTES)  # past the attributes byte
    if read is None:
        return None
    timestamp_deltas, at = read
    read = varints(u, at, ends, VARINT_BYTES)
    if read is None:
        return None
    offset_deltas, at = read
    read = varints(u, at, ends, VARINT_BYTES)
    if read is None:
        return None
    key_lengths, key_starts = read
    read = varints(u, key_starts + np.maximum(key_lengths, 0), ends, VARINT_BYTES)
    if read is None:
        return None
    value_lengths, value_starts = read
    read = varints(u, value_starts + np.maximum(value_lengths, 0), ends, VARINT_BYTES)
    if read is None:
        return None
    header_counts, headers_at = read
    return RecordColumns(
        lengths,
        ends,
        timestamp_deltas,
        offset_deltas,
        key_starts,
        key_lengths,
        value_starts,
        value_lengths,
        header_counts,
        headers_at,
    )


def varints(u: Array, pos: Array, ends: Array, max_bytes: int) -> tuple[Array, Array] | None:
    """The zig-zag varints at ``pos`` in ``u`` and the positions after them; None when one is
    longer than ``max_bytes`` or does not end by its ``ends``. Reads never leave ``u``."""
    if len(pos) == 0:
        return np.zeros(0, np.int64), pos
    last = len(u) - 1
    b = u[np.minimum(pos, last)]
    if (b < 0x80).all():  # every varint one byte: the common case, in a few operations
        if not (pos < ends).all():
            return None
        z = b.astype(np.int64)
        return (z >> 1) ^ -(z & 1), pos + 1
    value = (b & 0x7F).astype(np.uint64)
    width = np.ones(len(pos), np.int64)
    going = b >= 0x80
    for k in range(1, max_bytes):
        b = u[np.minimum(pos + k, last)]
        value |= np.where(going, b & 0x7F, 0).astype(np.uint64) << np.uint64(7 * k)
        width += going
        going &= b >= 0x80
        if not going.any():
            break
    else:
        return None
    after = pos + width
    if not (after <= ends).all():
        return None
    # Zig-zag undone on the unsigned value: a shift of the signed one would copy a set top bit.
    half = (value >> np.uint64(1)).view(np.int64)
    sign = (value & np.uint64(1)).view(np.int64)
    return half ^ -sign, after
