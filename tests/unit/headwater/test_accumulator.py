"""How the accumulator groups queued batches of one partition into requests."""

from __future__ import annotations

from headwater.client.cluster import ClusterClient
from headwater.config import ProducerConfig
from headwater.producer.accumulator import ReadyBatches, RecordAccumulator
from headwater.producer.metadata import PartitionCounts


def queued_requests(idempotent: bool, batches: int) -> list[int]:
    """Queue ``batches`` one-record batches of partition 0, then the batch counts of the
    requests the sender may send, one after another."""
    config = ProducerConfig.from_dict(
        {
            "bootstrap.servers": "http://127.0.0.1:9",
            "batch.size": 120,  # one record per batch
            "linger.ms": 0,
            "enable.idempotence": idempotent,
            "acks": "all" if idempotent else "1",
        }
    )
    servers = ClusterClient(["http://127.0.0.1:9"])
    try:
        metadata = PartitionCounts(servers, config.metadata_max_age_ms)
        metadata.known["t"] = 1  # no broker is asked
        accumulator = RecordAccumulator(config, metadata)
        for i in range(batches):
            accumulator.produce("t", b"x" * 40 + str(i).encode(), partition=0)
        ready = ReadyBatches(accumulator)
        sizes: list[int] = []
        while sum(sizes) < batches:
            requests = ready.wait_for_requests()
            assert requests is not None
            for request in requests:
                sizes.append(len(request.batches))
                ready.request_done(request)
        return sizes
    finally:
        servers.close()


def test_an_idempotent_producer_sends_at_most_five_batches_of_a_partition_per_request() -> None:
    # A broker remembers each producer's last five batches: a request the old leader stored
    # but did not acknowledge must be all duplicates at the new leader, not partly unknown.
    assert queued_requests(True, 12) == [5, 5, 2]


def test_without_idempotence_queued_batches_leave_together() -> None:
    assert queued_requests(False, 12) == [12]
