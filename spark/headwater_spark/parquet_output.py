"""The validation job's Parquet output: valid records by date, one set of files per source range.

Layout: ``<output>/date=YYYY-MM-DD/<range>-<n>.parquet`` (per record type under
``<output>/<record full name>/`` with the record-name strategies). ``<range>`` is a digest of the
source offset range the files hold (:func:`range_id`): a batch run's range, or one micro-batch's.
Spark writes a range's rows to ``<output>/_staging/<range>/`` first; the driver then deletes the
range's files from an earlier attempt and moves the new ones into their date directories under
their range's names. So a re-run of a range (a repeated batch run, a micro-batch replayed after a
crash) replaces exactly its own files, and a stream adds files to the date directories instead of
a directory per micro-batch. Readers ignore ``_staging`` (a leading underscore), and readers
listing a date directory while a range is being replaced may briefly miss that range's files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf
from pyspark.sql.types import StructType

from headwater_spark.files import HadoopFiles
from headwater_spark.offsets import OffsetRange


def range_id(ranges: Iterable[OffsetRange]) -> str:
    """A short digest naming a set of source ranges (the files' name prefix)."""
    text = json.dumps(
        sorted([r.topic, int(r.partition), int(r.start), int(r.end)] for r in ranges if r.size)
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def data_columns(data_type: object, prefix: str = "data") -> list[Column]:
    """The decoded record's fields as top-level columns (a non-record value as ``value``)."""
    if isinstance(data_type, StructType):
        return [sf.col(f"{prefix}.`{f.name}`").alias(f.name) for f in data_type.fields]
    return [sf.col(prefix).alias("value")]


def with_source_columns(valid: DataFrame, data: list[Column]) -> DataFrame:
    return valid.select(
        *data,
        sf.col("topic").alias("_topic"),
        sf.col("partition").alias("_partition"),
        sf.col("offset").alias("_offset"),
        sf.col("timestamp").alias("_timestamp"),
        sf.col("schema_id").alias("_schema_id"),
        sf.to_date("timestamp").cast("string").alias("date"),
    )


def write_range(files: HadoopFiles, rows: DataFrame, output: str, tag: str) -> int:
    """Write ``rows`` (with a ``date`` column) as the files of range ``tag``; returns files
    moved into place."""
    staging = files.join(output, "_staging", tag)
    files.delete(staging, recursive=True)
    rows.write.mode("overwrite").partitionBy("date").parquet(staging)
    for old in files.glob(files.join(output, "date=*", f"{tag}-*.parquet")):
        files.delete(old)
    moved = 0
    for written in sorted(files.glob(files.join(staging, "date=*", "*.parquet"))):
        date_dir = written.rstrip("/").split("/")[-2]
        files.rename(written, files.join(output, date_dir, f"{tag}-{moved:05d}.parquet"))
        moved += 1
    files.delete(staging, recursive=True)
    return moved
