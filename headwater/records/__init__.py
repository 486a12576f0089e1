"""Kafka's record format, shared by brokers and clients: batches, varints, CRC, codecs."""

from __future__ import annotations

from headwater.records.batch import decode_batches, iter_batches, valid_prefix
from headwater.records.compression import Compression, compress, decompress
from headwater.records.crc import crc32c
from headwater.records.decoder import Record, decode_batch, decode_batch_as
from headwater.records.encoder import encode_batch, encode_values_batch
from headwater.records.header import (
    HEADER_SIZE,
    BatchHeader,
    TimestampType,
    parse_header,
    set_base_offset,
    set_log_append_time,
)
from headwater.records.partitioner import StickyPartitioner, murmur2, partition_for_key
from headwater.records.varint import decode_varint, encode_varint

__all__ = [
    "HEADER_SIZE",
    "BatchHeader",
    "Compression",
    "Record",
    "StickyPartitioner",
    "TimestampType",
    "compress",
    "crc32c",
    "decode_batch",
    "decode_batch_as",
    "decode_batches",
    "decode_varint",
    "decompress",
    "encode_batch",
    "encode_values_batch",
    "encode_varint",
    "iter_batches",
    "murmur2",
    "parse_header",
    "partition_for_key",
    "set_base_offset",
    "set_log_append_time",
    "valid_prefix",
]
