"""Interop with an independent Kafka implementation: aiokafka's RecordBatch v2 writer and reader.

Our encoder must produce the very bytes another Kafka client writes, and each side must read the
other's batches in every codec (snappy in xerial framing, lz4 frames), so stored batches are
readable by any Kafka RecordBatch v2 decoder.
"""

from __future__ import annotations

import pytest

# aiokafka ships no type information; it is only a test oracle here.
from aiokafka.record.default_records import (  # type: ignore[import-untyped]
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)

from headwater.records import Compression, decode_batch, encode_batch

TS = 1_700_000_000_000
Records = list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]


def _theirs(records: Records, codec: Compression, timestamps: list[int], **producer: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=0,
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=1 << 24,
    )
    for i, ((key, value, headers), ts) in enumerate(zip(records, timestamps, strict=True)):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


def _sample(count: int) -> Records:
    return [
        (
            None if i % 3 == 0 else b"key-%d" % i,
            None if i == 7 else b"value %d " % i * (i % 30),
            [("trace", b"%d" % i), ("empty", None)] if i % 4 == 0 else [],
        )
        for i in range(count)
    ]


def test_uncompressed_bytes_equal_aiokafkas() -> None:
    records = _sample(40)
    timestamps = [TS + (i * 37) % 11 for i in range(40)]
    ours = encode_batch(
        records, timestamps=timestamps, producer_id=5, producer_epoch=2, base_sequence=100
    )
    theirs = _theirs(
        records,
        Compression.NONE,
        timestamps,
        producer_id=5,
        producer_epoch=2,
        base_sequence=100,
    )
    assert ours == theirs


@pytest.mark.parametrize("codec", list(Compression))
def test_aiokafka_reads_our_batches(codec: Compression) -> None:
    records = _sample(300)
    batch = DefaultRecordBatch(encode_batch(records, compression=codec, timestamp_ms=TS))
    assert batch.validate_crc()
    assert batch.compression_type == int(codec)
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in batch] == [
        (k, v, h, TS) for k, v, h in records
    ]


@pytest.mark.parametrize("codec", list(Compression))
def test_we_read_aiokafkas_batches(codec: Compression) -> None:
    records = _sample(300)
    header, decoded = decode_batch(_theirs(records, codec, [TS] * 300))
    assert header.compression is codec
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (i, k, v, h, TS) for i, (k, v, h) in enumerate(records)
    ]
