"""CRC-32C (Castagnoli), the checksum of a RecordBatch v2."""

from __future__ import annotations

import crc32c as _crc32c


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of ``data``, continuing from ``value`` (the CRC of the bytes before it)."""
    return int(_crc32c.crc32c(data, value))
