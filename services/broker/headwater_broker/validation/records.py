"""Checking every record of a batch before a broker appends it, as Kafka's log validator does.

The CRC proves only that the bytes arrived as the producer sent them, not that a reader can
decode them: a batch of plain records flagged gzip, gzip of garbage or a record claiming 2^40
bytes all carry valid CRCs. :func:`validate_records` decompresses the records section and walks
it, so whatever it accepts ``headwater.records.decoder`` reads back. Checked per record (layout
in ``headwater.records.encoder``): its length frames exactly its fields, ``offsetDelta`` is its
index in the batch,
``baseTimestamp + timestampDelta`` is an int64, key and value lengths are -1 (null) or within the
record, the header count is not negative and each header has a key; and the batch holds exactly
``recordsCount`` records and nothing after them.

A compressed section is decompressed under a cap (``max_decompressed``): a few kilobytes of gzip
can inflate to gigabytes, so decompression stops one byte past the cap rather than building the
whole section (``compression.py``).

Cost: records that all share the first one's layout -- plain records (no key, no headers, one
value length: what the SDK and REST produce write for fixed-size events) and fixed-size keyed
ones -- are checked column by column in a few C calls per batch once the first is walked
(``uniform.py``). Other sections of many records (keys of varying length, say) are checked
field by field for all records at once with numpy when it is installed (``columnar.py``, the
``server`` extra): one tight loop finds where each record starts, then a few array operations
per field. Whatever that does not prove valid, and every small batch, is walked by one loop
that reads varints in place and skips keys, values and headers without building an object for
them (``headwater.records.grammar.check_records``): that walk alone gives a verdict and its
message, so both paths refuse the same batches.
"""

from __future__ import annotations

from headwater.errors import CorruptRecordError
from headwater.records.compression import DecompressedTooLargeError, decompress
from headwater.records.grammar import check_records
from headwater.records.header import CODEC_MASK, HEADER_SIZE, BatchHeader, Buffer
from headwater_broker.validation.uniform import first_record_end, is_uniform_section

# Below this many records the walk is as quick as numpy's fixed cost per call.
_COLUMNAR_MIN_RECORDS = 32


def validate_records(
    buf: Buffer,
    pos: int,
    header: BatchHeader,
    *,
    max_decompressed: int | None = None,
    columnar: bool = True,
) -> None:
    """Raise CorruptRecordError unless every record of the batch at ``buf[pos:]`` decodes.

    ``header`` is the batch's checked header (``check_batch``): the batch is whole and its codec
    known. A compressed records section that decompresses to more than ``max_decompressed``
    bytes is refused as well, without decompressing further (None: no cap).
    ``columnar=False`` skips the numpy fast path (only to measure what it saves).
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    section = bytes(view[pos + HEADER_SIZE : pos + header.size])  # one copy
    codec = header.attributes & CODEC_MASK
    if codec:
        try:
            section = decompress(codec, section, max_decompressed)
        except DecompressedTooLargeError:
            raise DecompressedTooLargeError(
                f"batch at position {pos} decompresses to more than {max_decompressed} bytes, "
                "the cap on one batch's records"
            ) from None
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"batch at position {pos} does not decompress: {exc}"
            ) from None
    count = header.records_count
    if count > 1:
        first = first_record_end(section)
        if first is not None:
            # The first record checked alone; then, if every other record has its layout, the
            # section is valid as a whole without walking them.
            check_records(section[:first], 1, header.base_timestamp, pos)
            if is_uniform_section(section, first, count):
                return
    if (
        columnar
        and count >= _COLUMNAR_MIN_RECORDS
        and _columnar_valid(section, count, header.base_timestamp)
    ):
        return
    check_records(section, count, header.base_timestamp, pos)


def _columnar_valid(section: bytes, count: int, base_timestamp: int) -> bool:
    """Whether ``columnar.py`` proves the section valid; False without numpy (the client's
    install), which leaves the section to the walk."""
    try:
        from headwater_broker.validation.columnar import section_is_valid
    except ImportError:  # numpy is not installed: only the server extra brings it
        return False
    return section_is_valid(section, count, base_timestamp)
