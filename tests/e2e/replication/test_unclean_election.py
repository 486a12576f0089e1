"""``unclean.leader.election.enable``: the loss it causes is logged and counted.

Three broker processes; a topic on brokers 0 and 1 (``min.insync.replicas=1``, unclean
election allowed). Broker 1 is killed, so the in-sync set shrinks to broker 0, which then
acknowledges more records alone. Broker 0 is killed and broker 1 restarted: with every in-sync
replica fenced, broker 1 is elected uncleanly (``unclean`` in the partition state) and lacks
those records. When broker 0 returns it follows broker 1 and truncates them: the committed
offset range is logged and counted in ``headwater_broker_unclean_truncated_records_total``
(the records below the high watermark it had checkpointed).
Without the setting the partition stays offline instead (the controller tests cover that).
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from headwater.records.batch import encode_batch
from headwater_broker.log.watermarks import HIGH_WATERMARK_FILE
from tests.e2e.replication.cluster import (
    BATCHES,
    Cluster,
    create_topic,
    read_values,
    start_three,
    wait_for,
)
from tests.support import unique

pytestmark = pytest.mark.e2e

BEFORE = 20  # records both replicas hold
ALONE = 30  # records broker 0 acknowledges with itself as the only in-sync replica


def produce(cluster: Cluster, broker: int, topic: str, values: list[str]) -> None:
    for value in values:
        answer = httpx.post(
            f"{cluster.url(broker)}/topics/{topic}/partitions/0/batches",
            params={"acks": "all"},
            content=encode_batch([(None, value.encode(), [])]),
            headers=BATCHES,
            timeout=30,
        )
        assert answer.status_code == 200, answer.text


def truncated_metric(cluster: Cluster, broker: int, topic: str) -> float:
    text = httpx.get(f"{cluster.url(broker)}/metrics", timeout=10).text
    pattern = (
        r'^headwater_broker_unclean_truncated_records_total\{partition="0",topic="'
        + re.escape(topic)
        + r'"\} (\S+)$'
    )
    found = re.search(pattern, text, re.MULTILINE)
    return 0.0 if found is None else float(found.group(1))


def test_an_unclean_election_logs_and_counts_the_committed_records_it_loses(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path)
    topic = unique("unclean")
    try:
        start_three(cluster)
        create_topic(
            cluster,
            topic,
            replica_assignment=[[0, 1]],
            configs={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
        )
        wait_for(lambda: cluster.leader(topic) == 0, 30, "broker 0 leading")
        produce(cluster, 0, topic, [f"both-{i}" for i in range(BEFORE)])

        cluster.processes[1].kill()
        wait_for(lambda: (cluster.describe(topic) or {}).get("isr") == [0], 30, "ISR [0]")
        produce(cluster, 0, topic, [f"alone-{i}" for i in range(ALONE)])
        assert cluster.high_watermark(topic) == BEFORE + ALONE
        # The high watermark a replica knows after a crash is its last checkpoint (every 5 s,
        # as Kafka): what it counts as committed and lost is bounded by that.
        checkpoint = tmp_path / "broker-0" / f"{topic}-0" / HIGH_WATERMARK_FILE
        wait_for(
            lambda: checkpoint.exists() and checkpoint.read_text().strip() == str(BEFORE + ALONE),
            30,
            "broker 0's high watermark checkpointed",
        )

        cluster.processes[0].kill()
        cluster.start(1)
        wait_for(lambda: cluster.leader(topic) == 1, 60, "broker 1 elected uncleanly")
        produce(cluster, 1, topic, ["after"])

        cluster.start(0)
        wait_for(lambda: truncated_metric(cluster, 0, topic) > 0, 60, "the truncation counted")
        assert truncated_metric(cluster, 0, topic) == ALONE
        assert truncated_metric(cluster, 1, topic) == 0
        log = (tmp_path / "broker-0.log").read_text(errors="replace")
        assert f"truncated committed offsets [{BEFORE}, {BEFORE + ALONE})" in log, log[-3000:]

        def both_in_sync() -> bool:
            isr = (cluster.describe(topic) or {}).get("isr")
            return isinstance(isr, list) and sorted(isr) == [0, 1]

        wait_for(both_in_sync, 60, "broker 0 back in sync with the unclean leader")
        values, _ = read_values(cluster, topic, BEFORE + 1)
        assert values == [f"both-{i}" for i in range(BEFORE)] + ["after"]
    finally:
        cluster.stop_all()
