"""The metadata store on SQLite and PostgreSQL: bootstrap, the database clock, elections and
leases, the controller's compare-and-set, gapless change offsets under concurrent writers."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import sqlalchemy as sa

from headwater.errors import (
    MetadataUnavailableError,
    StaleControllerEpochError,
    StalePartitionEpochError,
)
from headwater.types import BrokerId
from headwater_broker.cluster import tables as t
from headwater_broker.cluster.changes import PartitionWrite, TopicDeletion
from headwater_broker.cluster.state import (
    ControllerEpoch,
    ControllerInfo,
    LeaderEpoch,
    PartitionEpoch,
    TopicState,
)
from headwater_broker.cluster.store import (
    ImageBehindError,
    MetadataStore,
    metadata_unavailable,
)
from tests.integration.cluster.conftest import Cluster
from tests.unit.cluster.states import partition


def topic_rows(store: MetadataStore) -> dict[str, str]:
    with store.read() as conn:
        return {r.name: r.configs for r in conn.execute(sa.select(t.topics))}


def test_every_store_on_one_database_sees_the_same_cluster(cluster: Cluster) -> None:
    first, second = cluster.store(), cluster.store()
    assert first.cluster_id == second.cluster_id
    assert len(first.cluster_id) == 36
    image = second.read_snapshot()
    assert image.offset == 0
    assert image.controller == ControllerInfo(BrokerId(-1), ControllerEpoch(0))


def test_the_database_clock_is_read_in_milliseconds(cluster: Cluster) -> None:
    store = cluster.store()
    with store.read() as conn:
        before = time.time() * 1000
        now = store.now_ms(conn)
        after = time.time() * 1000
        later = store.now_ms(conn)
    # The database runs on this machine: its clock and ours agree within a few milliseconds.
    assert before - 50 <= now <= after + 50
    assert later >= now


def test_one_election_wins_a_free_lease_and_the_epoch_grows_per_election(cluster: Cluster) -> None:
    a, b = cluster.store(), cluster.store()
    won = a.campaign(0, lease_ms=300)
    assert won is not None
    assert (won.epoch, won.offset) == (1, 1)
    assert b.campaign(1, lease_ms=300) is None
    assert a.renew(0, 1, lease_ms=300)
    time.sleep(0.35)
    taken = b.campaign(1, lease_ms=60_000)
    assert taken is not None
    assert (taken.epoch, taken.offset) == (2, 2)
    # The old holder learns it at its next renewal; its epoch stays refused.
    assert not a.renew(0, 1, lease_ms=300)
    row = a.read_controller()
    assert (row.broker_id, row.epoch, row.last_change) == (1, 2, 2)
    assert [c.record for c in a.read_all_changes()] == [
        ControllerInfo(BrokerId(0), ControllerEpoch(1)),
        ControllerInfo(BrokerId(1), ControllerEpoch(2)),
    ]


def test_a_stale_controller_write_is_refused_and_rolled_back(cluster: Cluster) -> None:
    old, new = cluster.store(), cluster.store()
    assert old.campaign(0, lease_ms=100) is not None
    topic = TopicState("orders", "id-orders", 1, {"retention.ms": "1000"})
    old.write_changes(1, 0, 1, [topic])
    time.sleep(0.15)
    assert new.campaign(1, lease_ms=60_000) is not None  # epoch 2, change 3
    with pytest.raises(StaleControllerEpochError) as refused:
        old.write_changes(
            1, 0, 3, [TopicState("orders", "id-orders", 1, {"retention.ms": "2"}), topic]
        )
    assert refused.value.message == (
        "Controller epoch 1 of broker 0 is stale: the controller is broker 1 at epoch 2"
    )
    # Nothing of the refused transaction reached any table.
    assert topic_rows(new) == {"orders": '{"retention.ms":"1000"}'}
    assert new.read_controller().last_change == 3
    assert [c.offset for c in new.read_all_changes()] == [1, 2, 3]
    # The same broker id with the wrong epoch, and the right epoch with another id, fail too.
    with pytest.raises(StaleControllerEpochError):
        new.write_changes(2, 0, 3, [topic])
    with pytest.raises(StaleControllerEpochError):
        new.write_changes(1, 1, 3, [topic])


def test_a_write_decided_from_an_old_image_is_refused_without_writing(cluster: Cluster) -> None:
    store = cluster.store()
    assert store.campaign(0, lease_ms=60_000) is not None
    store.write_changes(1, 0, 1, [TopicState("a", "id-a", 1)])
    with pytest.raises(ImageBehindError):
        store.write_changes(1, 0, 1, [TopicState("b", "id-b", 1)])
    assert set(topic_rows(store)) == {"a"}


def test_partition_writes_compare_and_set_their_epochs(cluster: Cluster) -> None:
    store = cluster.store()
    assert store.campaign(0, lease_ms=60_000) is not None
    p = partition([0, 1], topic="a")
    store.write_changes(1, 0, 1, [TopicState("a", "id-a", 1), PartitionWrite(p, None)])
    moved = partition([0, 1], isr=[0], topic="a", partition_epoch=1)
    store.write_changes(1, 0, 3, [PartitionWrite(moved, p)])
    # A second write made against the state before `moved` is refused, whole.
    stale = partition([0, 1], isr=[1], leader=1, topic="a", leader_epoch=1, partition_epoch=1)
    with pytest.raises(StalePartitionEpochError, match="no longer at leader epoch 0, partition"):
        store.write_changes(
            1, 0, 4, [TopicState("a", "id-a", 1, {"x": "1"}), PartitionWrite(stale, p)]
        )
    image = store.read_snapshot()
    assert image.partition("a", 0) == moved
    assert image.topic("a") == TopicState("a", "id-a", 1)
    assert image.offset == 4
    assert (moved.leader_epoch, moved.partition_epoch) == (LeaderEpoch(0), PartitionEpoch(1))


def test_resign_frees_the_lease_at_once_and_logs_no_controller(cluster: Cluster) -> None:
    a, b = cluster.store(), cluster.store()
    assert a.campaign(0, lease_ms=60_000) is not None
    a.resign(0, 1)
    assert a.read_controller().broker_id == -1
    assert b.campaign(1, lease_ms=60_000) is not None
    assert [c.record for c in b.read_all_changes()][-2:] == [
        ControllerInfo(BrokerId(-1), ControllerEpoch(1)),
        ControllerInfo(BrokerId(1), ControllerEpoch(2)),
    ]


def test_snapshot_and_log_agree(cluster: Cluster) -> None:
    store = cluster.store()
    assert store.campaign(0, lease_ms=60_000) is not None
    a = TopicState("a", "id-a", 2, {"retention.ms": "5"})
    parts = [partition([0, 1], topic="a", number=0), partition([1, 0], topic="a", number=1)]
    store.write_changes(1, 0, 1, [a, *(PartitionWrite(p, None) for p in parts)])
    store.write_changes(1, 0, 4, [TopicState("b", "id-b", 1), TopicDeletion("a", "id-a")])
    from headwater_broker.cluster.image import MetadataImage

    replayed, _ = MetadataImage.empty(store.cluster_id).apply(store.read_all_changes())
    assert replayed == store.read_snapshot()
    assert set(replayed.topics) == {"b"}


def test_pruning_keeps_the_newest_change(cluster: Cluster) -> None:
    store = cluster.store()
    assert store.campaign(0, lease_ms=60_000) is not None
    store.write_changes(1, 0, 1, [TopicState("a", "id-a", 1)])
    store.write_changes(1, 0, 2, [TopicState("b", "id-b", 1)])
    time.sleep(0.05)
    assert store.prune_changes(1, 0, older_than_ms=0) == 2
    assert [c.offset for c in store.read_all_changes()] == [3]
    batch = store.read_changes(0)
    assert batch.last_change == 3
    assert batch.changes[0].offset == 3


def test_change_offsets_stay_gapless_under_concurrent_writers_and_elections(
    cluster: Cluster,
) -> None:
    """Writers on their own connections race each other and a takeover: every committed change
    has the next offset, and none of a deposed epoch comes after its successor's election."""
    writers = [cluster.store() for _ in range(4)]
    usurper = cluster.store()
    assert writers[0].campaign(0, lease_ms=200) is not None
    committed: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(store: MetadataStore, n: int) -> None:
        i = 0
        while not stop.is_set():
            row = store.read_controller()
            i += 1
            try:
                changes = store.write_changes(
                    1, 0, row.last_change, [TopicState(f"w{n}-{i}", f"id-w{n}-{i}", 1)]
                )
            except (ImageBehindError, StaleControllerEpochError):
                continue
            except BaseException as exc:  # anything else fails the test
                errors.append(exc)
                return
            with lock:
                committed.extend(c.offset for c in changes)

    threads = [threading.Thread(target=write, args=(s, n)) for n, s in enumerate(writers)]
    for thread in threads:
        thread.start()
    time.sleep(0.25)
    while usurper.campaign(1, lease_ms=60_000) is None:
        time.sleep(0.01)
    time.sleep(0.2)
    stop.set()
    for thread in threads:
        thread.join()
    assert errors == []
    changes = usurper.read_all_changes()
    offsets = [c.offset for c in changes]
    assert offsets == list(range(1, len(offsets) + 1))
    assert sorted(committed) == [c.offset for c in changes if c.kind.value == "topic"]
    assert len(committed) >= 5
    takeover = next(
        c.offset for c in changes if c.record == ControllerInfo(BrokerId(1), ControllerEpoch(2))
    )
    assert all(c.controller_epoch == 2 for c in changes if c.offset >= takeover)
    assert len(topic_rows(usurper)) == len(committed)


@pytest.mark.anyio
@pytest.mark.needs("postgres")
async def test_a_session_the_server_ended_mid_transaction_is_an_outage_not_a_crash(
    postgres_url: str,
) -> None:
    """PostgreSQL ends a session left idle inside a transaction past the stall timeout (a
    broker paused between two statements): the next statement fails with SQLSTATE 25P03,
    which SQLAlchemy raises as InternalError. The store reports it as the retriable 50306, and
    the next call, on a fresh connection, succeeds."""
    store = MetadataStore(postgres_url, stall_timeout_ms=200)
    try:

        def paused_between_statements(store: MetadataStore) -> int:
            with store.read() as conn:
                conn.execute(sa.select(t.controller.c.last_change)).scalar_one()
                time.sleep(0.6)  # what a SIGSTOP would do, past the 200 ms timeout
                return int(conn.execute(sa.select(t.controller.c.epoch)).scalar_one())

        with pytest.raises(MetadataUnavailableError) as raised:
            await store.call(paused_between_statements, store)
        assert "idle-in-transaction" in raised.value.message
        assert store.contact_ms() == 0
        assert (await store.call(store.read_controller)).epoch == 0
    finally:
        store.close()


def test_only_outages_are_retriable(metadata_url: str) -> None:
    """Errors that say nothing of the database's reachability (a statement the database
    refuses: SQLite too raises it as OperationalError) are raised as they are, not as the
    retriable 50306; a pool with no free connection in time is an outage."""
    store = MetadataStore(metadata_url)
    try:
        with pytest.raises(sa.exc.DBAPIError) as raised:
            asyncio.run(store.call(_select_missing_table, store))
        assert metadata_unavailable(raised.value) is None
        assert metadata_unavailable(sa.exc.TimeoutError("QueuePool limit reached")) is not None
        assert metadata_unavailable(sa.exc.IntegrityError("INSERT", {}, Exception())) is None
    finally:
        store.close()


def _select_missing_table(store: MetadataStore) -> None:
    with store.read() as conn:
        conn.execute(sa.text("SELECT * FROM no_such_table"))
