"""The validation job's fused read: fetch, decode and validate a range in one executor-side pass.

A run with no record outputs needs only counts of verdicts. Reading through the public
``headwater`` format and validating in ``mapInArrow`` moves every record from the Python reader
into the JVM and back into another Python worker before it is validated; this internal format
(``headwater-verdicts``) instead validates inside the data source's ``read()`` and hands Spark
only a few count rows per Arrow batch (:data:`~headwater_spark.verdicts.COUNT_SCHEMA`), so nothing
per record crosses to the JVM. Planning is the ``headwater`` batch reader's (same options, same
offset rules and splitting); only ``read()`` differs. It is not meant for users, who keep the
``headwater`` format.

Extra options: ``registry`` (URL), ``valueExpectation`` and optionally ``keyExpectation`` (JSON
from :func:`~headwater_spark.verdicts.expected_json`). ``read`` runs on executors; validators
(and their schema caches) live per Python worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from headwater_spark.options import OptionError, SourceOptions
from headwater_spark.source import HeadwaterBatchReader, RangePartition
from headwater_spark.topic_log import TopicLog
from headwater_spark.verdicts import (
    COUNT_SCHEMA,
    Expectation,
    cached_validator,
    count_rows,
    parse_expected_json,
)

FORMAT = "headwater-verdicts"
_EXTRA = ("registry", "valueExpectation", "keyExpectation")


class HeadwaterVerdictSource(DataSource):
    """Format ``headwater-verdicts``: verdict counts of a batch offset range (the job's own)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return COUNT_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(dict(self.options), streaming=False, extra_names=_EXTRA)
        registry = options.extra.get("registry")
        value = options.extra.get("valueExpectation")
        if not registry or not value:
            raise OptionError(f"the {FORMAT} source needs 'registry' and 'valueExpectation'")
        key = options.extra.get("keyExpectation")
        return VerdictReader(
            options,
            registry,
            parse_expected_json(value),
            None if key is None else parse_expected_json(key),
        )


class VerdictReader(HeadwaterBatchReader):
    """The ``headwater`` batch reader's planning; ``read`` validates instead of yielding rows."""

    def __init__(
        self,
        options: SourceOptions,
        registry: str,
        value: Expectation,
        key: Expectation | None,
    ) -> None:
        super().__init__(options)
        self.registry = registry
        self.value = value
        self.key = key

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, RangePartition):
            return  # Spark's placeholder partition when nothing was planned
        r = partition.range
        value_validator = cached_validator(self.registry, self.value)
        key_validator = None if self.key is None else cached_validator(self.registry, self.key)
        with TopicLog(self.options.brokers) as log:
            for columns in log.read_columns(
                r.topic,
                r.partition,
                r.start,
                r.end,
                self.options.rows_per_batch,
                lean=key_validator is None,
                fail_on_data_loss=self.options.fail_on_data_loss,
            ):
                yield count_rows(
                    r.topic,
                    r.partition,
                    columns.offsets.tolist(),
                    columns.value_list(),
                    None if key_validator is None else columns.key_list(),
                    value_validator,
                    key_validator,
                    (columns.data, columns.value_starts, columns.value_lengths),
                )
