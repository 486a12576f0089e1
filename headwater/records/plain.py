"""The plain-record fast path: records sections of null-key, header-less records of one length.

Most producers of fixed-size events send records with a null key, no headers, the batch's
timestamp and one value length. Such a record's bytes are::

    length | 00 attrs | 00 timestampDelta | offsetDelta | 01 null key | valueLength | value | 00

so everything around the value depends only on the value's length n and the offsetDelta. Per n a
table holds, per offsetDelta, the previous record's trailing 00 and the bytes before the value;
a records section is then one join of table entries interleaved with the values by slice
assignment, and reading one back is slicing at known positions: no Python code runs per record.
Anything else goes through the general encoder and decoder, which produce the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import cast

from headwater.records.varint import NULL_LENGTH, SMALL_LIMIT, SMALL_VARINTS, read_varint

_PLAIN_VALUE_LIMIT = 1 << 14
_PLAIN_TABLES_KEPT = 8  # distinct value lengths whose tables are kept (each <= count entries)
# Shared by every thread (producer workers encode in parallel): a table is an immutable tuple,
# replaced whole when a longer one is needed, so a reader never sees one half-built.
_plain_tables: dict[int, tuple[bytes, ...]] = {}


def _plain_table(n: int, count: int) -> tuple[bytes, ...]:
    table = _plain_tables.get(n, ())
    if len(table) < count:
        middle = NULL_LENGTH + SMALL_VARINTS[n]
        rest = 2 + len(middle) + n + 1  # record length without the offsetDelta's bytes
        table += tuple(
            b"\x00" + SMALL_VARINTS[rest + len(delta)] + b"\x00\x00" + delta + middle
            for delta in SMALL_VARINTS[len(table) : count]
        )
        if len(_plain_tables) >= _PLAIN_TABLES_KEPT:
            _plain_tables.clear()
        _plain_tables[n] = table
    return table


def plain_section(values: Sequence[bytes | None]) -> bytes | None:
    """The records section of null-key, header-less records with these values, or None unless
    they all have one length (and there are at most SMALL_LIMIT)."""
    count = len(values)
    if count > SMALL_LIMIT:
        return None
    # A null value makes len() raise: the values are then not plain. Past that, all are bytes.
    sized = cast("Sequence[bytes]", values)
    try:
        n = len(sized[0])
        if n >= _PLAIN_VALUE_LIMIT - 32 or list(map(len, sized)).count(n) != count:
            return None
    except TypeError:
        return None
    return _join_plain(_plain_table(n, count)[:count], sized, count)


def _join_plain(table: Sequence[bytes], values: Sequence[bytes], count: int) -> bytes:
    parts: list[bytes] = [b"\x00"] * (2 * count + 1)
    parts[0 : 2 * count : 2] = table
    parts[1 : 2 * count : 2] = values
    parts[0] = parts[0][1:]  # the first record has no record before it
    return b"".join(parts)


def plain_values(section: bytes, count: int) -> list[bytes] | None:
    """The values of ``section`` if it is exactly a plain records section of ``count`` records,
    else None (then the general decoder reads or rejects it).

    The first record gives the value length n; the values are sliced where plain records of
    length n put them, and the section is accepted only if re-encoding them gives ``section``
    byte for byte, so nothing is assumed that was not checked.
    """
    if not 0 < count <= SMALL_LIMIT or len(section) < 7:
        return None
    i = 1 if section[0] < 0x80 else 2  # the first record's length varint
    try:
        if section[i : i + 4] != b"\x00\x00\x00\x01" or (
            section[i + 4] >= 0x80 and section[i + 5] >= 0x80
        ):
            return None
        n, _ = read_varint(section, i + 4)
    except IndexError:  # too short for a plain record: the general decoder says what is wrong
        return None
    if not 0 <= n < _PLAIN_VALUE_LIMIT - 32:
        return None
    table = _plain_table(n, count)[:count]
    # Record d's value starts after entries 0..d and values 0..d-1, less the first entry's
    # leading 00 (not in the section): -1 - n + sum(len(entry) + n for entries 0..d).
    starts = accumulate(map(n.__add__, map(len, table)), initial=-1 - n)
    next(starts)
    values = [section[start : start + n] for start in starts]
    return values if _join_plain(table, values, count) == section else None
