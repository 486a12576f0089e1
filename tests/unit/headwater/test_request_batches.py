"""How many queued batches of one partition leave in one produce request."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.config import ProducerConfig
from headwater.producer.accumulator import ReadyBatches, RecordAccumulator


class Counts:
    """Partition counts known without asking a broker."""

    def __init__(self) -> None:
        self.known = {"t": 1}


def requests_of(config: dict[str, Any], batches: int) -> list[int]:
    """Batches per request for ``batches`` full batches queued on partition 0."""
    acc = RecordAccumulator(
        ProducerConfig.from_dict({"batch.size": 200, "linger.ms": 0, **config}),
        Counts(),  # type: ignore[arg-type]  # only .known is read on the produce path
    )
    for _ in range(batches):
        acc.produce("t", b"x" * 150, partition=0)
    ready = ReadyBatches(acc)
    sizes: list[int] = []
    while sum(sizes) < batches:
        requests = ready.wait_for_requests()
        assert requests is not None
        assert len(requests) == 1
        sizes.append(len(requests[0].batches))
        ready.request_done(requests[0])
    return sizes


def test_an_idempotent_request_carries_at_most_five_batches_of_a_partition() -> None:
    # A partition remembers a producer's last 5 batches: a retried request of more would find
    # its first batches forgotten and be refused as a sequence gap.
    assert requests_of({}, 12) == [5, 5, 2]


@pytest.mark.parametrize("acks", ["1", "all"])
def test_without_idempotence_queued_batches_leave_together(acks: str) -> None:
    assert requests_of({"enable.idempotence": False, "acks": acks}, 12) == [12]
