"""Three broker processes on one SQLite metadata file, for the replication fault tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from headwater.records.batch import decode_batches, encode_batch, iter_batches
from tests.support.cluster import BrokerCluster
from tests.support.waiting import wait_until

BATCHES = {"content-type": "application/vnd.headwater.batches"}


class Cluster(BrokerCluster):
    """Three brokers with the replication tests' timing: followers leave the ISR after 4 s."""

    def __init__(self, root: Path, metadata_url: str | None = None) -> None:
        super().__init__(
            root,
            3,
            metadata_url,
            env={"BROKER_REPLICA_LAG_TIME_MAX_MS": "4000", "BROKER_REQUEST_TIMEOUT_MS": "10000"},
        )
        # Brokers a test cut off from the cluster: their view is stale, so nobody asks them.
        self.cut: set[int] = set()

    def alive(self) -> list[int]:
        return [b for b in self.running() if b not in self.cut]

    def describe(self, topic: str) -> dict[str, object] | None:
        for b in self.alive():
            try:
                answer = httpx.get(f"{self.url(b)}/topics/{topic}", timeout=1)
            except httpx.HTTPError:
                continue
            if answer.status_code == 200:
                partition: dict[str, object] = answer.json()["partitions"][0]
                return partition
        return None

    def leader(self, topic: str) -> int:
        described = self.describe(topic)
        leader = -1 if described is None else described["leader"]
        assert isinstance(leader, int)
        return leader

    def high_watermark(self, topic: str) -> int:
        described = self.describe(topic)
        end = -1 if described is None else described["end_offset"]
        assert isinstance(end, int)
        return end


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    wait_until(condition, timeout_s, what, interval_s=0.1)


def partition_log(data_dir: Path, topic: str) -> bytes:
    """The batches of a replica's partition directory, segments in offset order."""
    directory = data_dir / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def below(data: bytes, end: int) -> bytes:
    """The whole batches of ``data`` that end before offset ``end``."""
    cut = 0
    for pos, header in iter_batches(data):
        if header.last_offset >= end:
            break
        cut = pos + header.size
    return data[:cut]


def read_values(
    cluster: Cluster, topic: str, until: int, *, url: str | None = None
) -> tuple[list[str], int]:
    """Every value of partition 0 from offset 0 up to at least ``until`` -- an end the test
    knows is committed (past every acknowledged offset) -- read from the leader, and the offset
    reached. ``url``: the broker to ask first (else the leader the cluster reports).

    Leadership may move while it reads (a preferred leader takes the partition back right
    after it rejoins the ISR), and a new leader's high watermark is not known until its
    followers' first fetches: so a 421 is followed to the leader it names, and a 503 (no leader,
    or 50307 while the new leader's high watermark is not known yet), a refused connection or
    an empty answer before ``until`` is asked again, for up to 30 s. An empty answer is the end
    only past ``until``.
    """
    values: list[str] = []
    offset = 0
    deadline = time.monotonic() + 30
    url = url or cluster.url(cluster.leader(topic))
    with httpx.Client(timeout=10) as client:
        while True:
            assert time.monotonic() < deadline, f"read stuck at offset {offset} below {until}"
            try:
                answer = client.get(
                    f"{url}/topics/{topic}/partitions/0/records",
                    params={"offset": offset, "max_wait_ms": 200},
                    headers={"accept": "application/vnd.headwater.batches"},
                )
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code == 421:
                named = answer.json().get("leader_url")
                url = (
                    named if isinstance(named, str) else cluster.url(max(cluster.leader(topic), 0))
                )
                continue
            if answer is None or answer.status_code == 503:
                time.sleep(0.1)
                url = cluster.url(max(cluster.leader(topic), 0))
                continue
            answer.raise_for_status()
            if not answer.content:
                if offset >= until:
                    return values, offset
                url = cluster.url(max(cluster.leader(topic), 0))
                continue
            values.extend(bytes(r.value or b"").decode() for r in decode_batches(answer.content))
            offset = int(answer.headers["headwater-next-offset"])


def batch_epochs(url: str, topic: str) -> dict[int, int]:
    """The leader epoch stamped into each stored batch of partition 0, by its last offset."""
    epochs: dict[int, int] = {}
    offset = 0
    with httpx.Client(base_url=url, timeout=10) as client:
        while True:
            answer = client.get(
                f"/topics/{topic}/partitions/0/records",
                params={"offset": offset},
                headers={"accept": "application/vnd.headwater.batches"},
            )
            answer.raise_for_status()
            if not answer.content:
                return epochs
            for _pos, header in iter_batches(answer.content):
                epochs[header.last_offset] = header.partition_leader_epoch
            offset = int(answer.headers["headwater-next-offset"])


def check_acknowledged(values: list[str], acknowledged: list[str]) -> None:
    """Every acknowledged value stored once, in acknowledged order."""
    assert len(values) == len(set(values)), "a value stored twice"
    positions = {v: i for i, v in enumerate(values)}
    lost = [v for v in acknowledged if v not in positions]
    assert not lost, f"{len(lost)} acknowledged values lost, first {lost[:5]}"
    order = [positions[v] for v in acknowledged]
    assert order == sorted(order), "acknowledged values out of order"


def replicas_identical(root: Path, topic: str, high_watermark: int) -> None:
    logs = [below(partition_log(root / f"broker-{b}", topic), high_watermark) for b in range(3)]
    assert logs[0] == logs[1] == logs[2]
    assert len(list(iter_batches(logs[0]))) > 0


# min ISR 2 of 3, and 4000-byte segments so that a test's load rolls several of them.
TOPIC_CONFIGS = {"min.insync.replicas": "2", "segment.bytes": "4000"}


def create_topic(
    cluster: Cluster,
    topic: str,
    *,
    replica_assignment: list[list[int]] | None = None,
    configs: dict[str, str] | None = None,
    via: int = 0,
) -> None:
    """One partition on three replicas placed by the controller (or ``replica_assignment``),
    with :data:`TOPIC_CONFIGS` unless ``configs`` says otherwise; returns once it has a leader."""
    body: dict[str, object] = {
        "name": topic,
        "configs": TOPIC_CONFIGS if configs is None else configs,
    }
    if replica_assignment is None:
        body |= {"partitions": 1, "replication_factor": 3}
    else:
        body["replica_assignment"] = replica_assignment
    created = httpx.post(f"{cluster.url(via)}/topics", json=body, timeout=30)
    assert created.status_code == 201, created.text
    wait_for(lambda: cluster.leader(topic) >= 0, 30, "a leader")


def start_three(cluster: Cluster, **extra: str) -> None:
    for b in range(3):
        cluster.start(b, **extra)
    wait_all_active(cluster)


def wait_all_active(cluster: Cluster) -> None:
    def all_active() -> bool:
        brokers = httpx.get(f"{cluster.url(0)}/cluster", timeout=5).json()["brokers"]
        return sum(1 for b in brokers if b["state"] == "active") == 3

    wait_for(all_active, 30, "three active brokers")


PER_BATCH = 5


class Producer:
    """An idempotent acks=all producer of unique values in a thread, following the leader.

    Each batch is retried with its sequence after a 421, 503, 504, timeout or refused connection
    (as the SDK does) until acknowledged; any other answer, or a batch not acknowledged within a
    minute, is an error that stops it. ``answers`` records (time, broker, status, last offset or
    -1) of each send.
    """

    def __init__(
        self,
        cluster: Cluster,
        topic: str,
        producer: dict[str, int],
        timeout_s: float = 15,
        *,
        retry_storage_errors: bool = False,
        route: Callable[[], int] | None = None,
        prefix: str = "",
    ) -> None:
        self.prefix = prefix  # of every value, to tell producers apart
        self.cluster = cluster
        # The broker to send to: the leader as the cluster reports it unless ``route`` says.
        self.route = route or (lambda: cluster.leader(topic))
        self.retry_storage_errors = retry_storage_errors
        self.storage_errors: list[tuple[int, int]] = []  # broker, error code of each 500
        self.topic = topic
        self.producer = producer
        self.timeout_s = timeout_s
        self.acknowledged: list[str] = []
        self.last_offsets: list[int] = []
        self.errors: list[str] = []
        self.answers: list[tuple[float, int, int, int]] = []  # time, broker, status, last offset
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        assert not self._thread.is_alive(), "the producer did not stop"

    def _run(self) -> None:
        try:
            self._produce()
        finally:
            self.done.set()

    def _produce(self) -> None:
        with httpx.Client(timeout=self.timeout_s) as client:
            leader = self.route()
            for i in range(100_000):  # bounded; the test stops it long before
                if self._stop.is_set():
                    return
                values = [f"{self.prefix}v{i}-{j}" for j in range(PER_BATCH)]
                body = encode_batch(
                    [(None, v.encode(), []) for v in values],
                    producer_id=self.producer["producer_id"],
                    producer_epoch=self.producer["producer_epoch"],
                    base_sequence=i * PER_BATCH,
                )
                deadline = time.monotonic() + 60
                while True:
                    if time.monotonic() > deadline:
                        self.errors.append(f"batch {i} never acknowledged")
                        return
                    url = f"{self.cluster.url(leader)}/topics/{self.topic}/partitions/0/batches"
                    try:
                        answer = client.post(
                            url, params={"acks": "all"}, content=body, headers=BATCHES
                        )
                    except httpx.HTTPError:
                        answer = None
                    status = 0 if answer is None else answer.status_code
                    last = -1
                    if answer is not None and answer.status_code == 200:
                        last = answer.json()["batches"][0]["last_offset"]
                    self.answers.append((time.monotonic(), leader, status, last))
                    if last >= 0:
                        self.acknowledged.extend(values)
                        self.last_offsets.append(last)
                        break
                    if answer is not None and answer.status_code == 500:
                        code = int(answer.json().get("error_code", 0))
                        self.storage_errors.append((leader, code))
                        if self.retry_storage_errors and code == 50003:
                            time.sleep(0.05)  # retriable, as Kafka's KAFKA_STORAGE_ERROR
                            leader = max(self.route(), 0)
                            continue
                    if answer is not None and answer.status_code not in (421, 503, 504):
                        self.errors.append(f"batch {i}: {answer.status_code} {answer.text}")
                        return
                    time.sleep(0.05)
                    leader = max(self.route(), 0)


def all_in_sync(cluster: Cluster, topic: str) -> bool:
    described = cluster.describe(topic)
    isr = [] if described is None else described["isr"]
    return isinstance(isr, list) and sorted(isr) == [0, 1, 2]


def controller(cluster: Cluster) -> int:
    """The controller's broker id as a live broker reports it (-1 when none answers)."""
    for b in cluster.alive():
        try:
            answer = httpx.get(f"{cluster.url(b)}/cluster", timeout=1)
        except httpx.HTTPError:
            continue
        if answer.status_code == 200:
            broker_id = answer.json()["controller"]["broker_id"]
            assert isinstance(broker_id, int)
            return broker_id
    return -1


def acknowledge_more(load: Producer, batches: int, timeout_s: float, what: str) -> None:
    """Wait until ``load`` has ``batches`` more batches acknowledged (or stopped on an error)."""
    target = len(load.acknowledged) + batches * PER_BATCH
    wait_for(lambda: len(load.acknowledged) >= target or load.done.is_set(), timeout_s, what)
    assert not load.done.is_set(), f"the producer stopped: {load.errors}"


def check_after_healing(
    cluster: Cluster, topic: str, *loads: Producer, reader: Reader | None = None
) -> int:
    """Stop ``loads`` (and ``reader``) and check the partition: every value each acknowledged
    there once, in its acknowledged order; what the reader saw, a prefix of the partition.

    Returns the high watermark read up to; the caller compares the replicas on disk with
    ``replicas_identical`` once the brokers are stopped."""
    for load in loads:
        load.stop()
        assert not load.errors, load.errors
    wait_for(lambda: all_in_sync(cluster, topic), 60, "every replica back in the ISR")
    last = max(max(load.last_offsets, default=-1) for load in loads)
    wait_for(
        lambda: cluster.high_watermark(topic) > last,
        30,
        "the high watermark past every acknowledged offset",
    )
    values, high_watermark = read_values(cluster, topic, last + 1)
    for load in loads:
        check_acknowledged(values, load.acknowledged)
    if reader is not None:
        reader.stop()
        seen = reader.seen
        assert seen, "the reader saw nothing"
        assert seen == values[: len(seen)], "a value a consumer saw is missing or moved"
    time.sleep(1.0)  # the followers copy the last high watermark
    return high_watermark


class Reader:
    """A consumer of partition 0 in a thread, following the leader, from offset 0 on.

    ``seen`` holds every value it was given, in order; since a consumer reads below the high
    watermark only, ``seen`` must stay a prefix of the partition whatever faults happen.
    """

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the reader did not stop"

    def _run(self) -> None:
        offset = 0
        with httpx.Client(timeout=2) as client:
            while not self._stop.is_set():
                leader = self.cluster.leader(self.topic)
                if leader < 0:
                    time.sleep(0.1)
                    continue
                try:
                    answer = client.get(
                        f"{self.cluster.url(leader)}/topics/{self.topic}/partitions/0/records",
                        params={"offset": offset, "max_wait_ms": 200},
                        headers={"accept": "application/vnd.headwater.batches"},
                    )
                except httpx.HTTPError:
                    time.sleep(0.1)
                    continue
                if answer.status_code != 200:
                    time.sleep(0.1)
                    continue
                if answer.content:
                    records = [r for r in decode_batches(answer.content) if r.offset >= offset]
                    self.seen.extend(bytes(r.value or b"").decode() for r in records)
                    offset = int(answer.headers["headwater-next-offset"])
                else:
                    time.sleep(0.05)
