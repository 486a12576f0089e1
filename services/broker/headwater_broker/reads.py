"""The read path: stored batches and decoded records from a partition's leader, and its offsets.

Reads copy bytes below the high watermark and take no lock (the threading policy in
``broker.py``). A fetch at the end of the log long-polls; leadership moving or the topic going
meanwhile is noticed when it wakes. Offsets follow KIP-207: a new leader's end offset is unknown
until its high watermark has reached the start of its epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.errors import InvalidOffsetError, OffsetNotAvailableError
from headwater.records.batch import Record, decode_batch
from headwater.types import Offset, TimestampMs
from headwater_broker import metrics
from headwater_broker.appends import max_decompressed
from headwater_broker.log.local_log import FetchData
from headwater_broker.replication.leader import PartitionLeader
from headwater_broker.routing import Routing
from headwater_broker.settings import BrokerSettings

KNOWN_HIGH_WATERMARK_WAIT_MS = 5000
"""How long an offsets request at a new leader waits for its high watermark to be known."""


@dataclass(frozen=True)
class RecordsFetch:
    """Decoded records at offsets >= the requested one, and the partition's bounds."""

    records: list[Record]
    next_offset: Offset
    high_watermark: Offset
    log_start_offset: Offset


class Reads:
    """One broker's read path (see the module docstring)."""

    def __init__(self, settings: BrokerSettings, routing: Routing) -> None:
        self.settings = settings
        self.routing = routing

    async def fetch(
        self, topic_name: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int
    ) -> FetchData:
        """Stored batches from ``offset``; at the end, wait up to ``max_wait_ms`` for data."""
        plog = self.routing.served_log(topic_name, partition)
        if offset < 0:
            raise InvalidOffsetError(f"Offset must be >= 0, got {offset}")
        if max_bytes < 1:
            raise InvalidOffsetError(f"max_bytes must be >= 1, got {max_bytes}")
        plog.check_offset(offset)
        if offset >= plog.high_watermark and max_wait_ms > 0:
            await plog.wait_for_data(offset, max_wait_ms / 1000)
            # Deleted (40401) or led elsewhere now (421) while waiting.
            plog = self.routing.served_log(topic_name, partition)
        data = plog.read(offset, max_bytes)
        if data.data:
            metrics.FETCH_BYTES.labels(topic_name).inc(len(data.data))
            metrics.FETCH_RECORDS.labels(topic_name).inc(data.records)
        return data

    async def fetch_records(
        self,
        topic_name: str,
        partition: int,
        offset: int,
        max_bytes: int,
        max_wait_ms: int,
        max_records: int | None,
    ) -> RecordsFetch:
        """Like :meth:`fetch`, decoded: records at offsets >= ``offset`` only."""
        if max_records is not None and max_records < 1:
            raise InvalidOffsetError(f"max_records must be >= 1, got {max_records}")
        data = await self.fetch(topic_name, partition, offset, max_bytes, max_wait_ms)
        records: list[Record] = []
        buf = data.data
        pos = 0
        # The cap of ingest again: a batch stored with validation off, or before the cap was
        # lowered, is refused (40003) rather than inflated whole into this broker's memory.
        config = self.routing.served_log(topic_name, partition).config
        cap = max_decompressed(self.settings, config)
        while pos < len(buf) and (max_records is None or len(records) < max_records):
            header, batch_records = decode_batch(buf, pos, max_decompressed=cap)
            pos += header.size
            records.extend(r for r in batch_records if r.offset >= offset)
        next_offset = data.next_offset
        if max_records is not None and len(records) > max_records:
            del records[max_records:]
            next_offset = Offset(records[-1].offset + 1)
        return RecordsFetch(records, next_offset, data.high_watermark, data.log_start_offset)

    async def offsets(self, topic_name: str, partition: int) -> tuple[Offset, Offset]:
        """Log start and high watermark of a partition this broker leads.

        The end offset never goes backwards across a leader change: a new leader answers once
        its high watermark has reached the start of its epoch (a fetch round of its followers),
        waiting briefly for that, else 503 50307 (Kafka's KIP-207).
        """
        plog = (await self._known_leader(topic_name, partition)).plog
        return plog.log_start_offset, plog.high_watermark

    async def lookup_offset(
        self, topic_name: str, partition: int, timestamp: int
    ) -> tuple[Offset, TimestampMs] | None:
        """Earliest offset whose timestamp is >= ``timestamp`` (None when there is none), among
        the records below the high watermark once it is known (see :meth:`offsets`)."""
        leader = await self._known_leader(topic_name, partition)
        return leader.plog.lookup_timestamp(timestamp)

    async def _known_leader(self, topic_name: str, partition: int) -> PartitionLeader:
        leader = self.routing.leader_role(topic_name, partition)
        wait_s = min(self.settings.request_timeout_ms, KNOWN_HIGH_WATERMARK_WAIT_MS) / 1000
        if not await leader.wait_high_watermark_known(wait_s):
            raise OffsetNotAvailableError(
                f"Broker {self.routing.broker_id} leads partition {partition} of topic "
                f"'{topic_name}' since leader epoch {leader.leader_epoch}, and its high watermark "
                f"({leader.plog.high_watermark}) has not reached the epoch's start offset "
                f"({leader.epoch_start_offset}) yet; retry"
            )
        return self.routing.leader_role(topic_name, partition)
