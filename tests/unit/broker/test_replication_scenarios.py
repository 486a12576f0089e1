"""Replication of one partition over real log directories: the KIP-101 and KIP-279 cases,
epoch fencing, in-sync tracking, the high watermark and acks=all."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from headwater.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    StaleBrokerEpochError,
    UnknownLeaderEpochError,
)
from headwater.records.batch import iter_batches
from headwater.types import BrokerId
from headwater_broker.cluster.election import IsrMember
from headwater_broker.cluster.state import BrokerEpoch
from headwater_broker.log.leader_epoch import EpochEntry
from headwater_broker.replication.leader import serve_fetch
from headwater_broker.replication.wire import FetchPartition, PartitionResult, ReplicaFetchRequest
from tests.unit.broker.replication_sim import LAG_MS, Sim, log_bytes, log_values, values_batch

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_followers_copy_the_log_and_the_high_watermark_follows(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    await sim.append(["a", "b"])
    await sim.append(["c"])
    assert sim.leader.plog.high_watermark == 0  # no follower has it yet
    await sim.fetch(1)
    assert sim.leader.plog.high_watermark == 0  # broker 2 has not fetched
    await sim.fetch(2)
    # Fetches carried offset 0: the followers now hold 3 records, the leader does not know yet.
    assert sim.leader.plog.high_watermark == 0
    await sim.fetch(1)
    await sim.fetch(2)
    assert sim.leader.plog.high_watermark == 3
    await sim.fetch(1)
    assert sim.replicas[1].plog.high_watermark == 3
    await sim.catch_up()
    for replica in sim.replicas:
        assert log_bytes(replica.plog) == log_bytes(sim.leader.plog)
        assert log_values(replica.plog) == ["a", "b", "c"]
        assert replica.plog.epochs.entries() == [EpochEntry(1, 0)]


async def test_kip101_a_follower_does_not_truncate_to_its_high_watermark(tmp_path: Path) -> None:
    """Scenario 1 of KIP-101: losing acknowledged data by truncating to the high watermark."""
    sim = Sim(tmp_path, n=2)
    await sim.append(["m1"])
    await sim.append(["m2"])
    await sim.fetch(1)  # the follower copies m1 and m2
    follower = sim.replicas[1]
    assert follower.follower is not None
    # Its next fetch moves the leader's high watermark to 2 (m2 acknowledged), but the answer
    # that would tell it so is lost: it crashes first.
    sim.lead.handle_fetch(follower.follower.fetch_entry(), 1, follower.incarnation, sim.now)
    assert sim.leader.plog.high_watermark == 2
    assert follower.plog.high_watermark == 0
    sim.crash(1)  # restarts with a high watermark of 0 but m2 in its log
    assert sim.replicas[1].plog.log_end_offset == 2  # nothing cut to the high watermark
    await sim.fetch(1)  # at the leader's end: caught up, back into the ISR
    sim.isr_step(commit=True)
    assert sim.isr == [0, 1]
    sim.crash(0)  # the leader dies; broker 1 is the only one left in the ISR and leads
    assert sim.leader_id == 1
    assert log_values(sim.leader.plog) == ["m1", "m2"]
    await sim.catch_up()
    assert log_values(sim.replicas[0].plog) == ["m1", "m2"]


async def test_kip101_divergent_tails_are_truncated_to_the_divergence_point(
    tmp_path: Path,
) -> None:
    """Scenario 2 of KIP-101: the old leader's unreplicated m2 is replaced by the new m3."""
    sim = Sim(tmp_path, n=2)
    await sim.append(["m1"])
    await sim.fetch(1)
    await sim.append(["m2"])  # written only on broker 0
    sim.elect(1)  # broker 0 stalls; broker 1 (in the ISR) takes over in epoch 2
    await sim.append(["m3"])
    assert log_values(sim.replicas[0].plog) == ["m1", "m2"]
    result = await sim.fetch(0)
    assert result.diverging is not None
    assert (result.diverging.epoch, result.diverging.end_offset) == (1, 1)
    assert sim.replicas[0].outcomes[-1].truncated_from == 2
    assert sim.replicas[0].outcomes[-1].truncated_to == 1
    await sim.catch_up()
    assert log_values(sim.replicas[0].plog) == ["m1", "m3"]
    assert log_bytes(sim.replicas[0].plog) == log_bytes(sim.replicas[1].plog)
    assert sim.replicas[0].plog.epochs.entries() == [EpochEntry(1, 0), EpochEntry(2, 1)]


async def test_kip279_fast_leader_flips_need_several_rounds(tmp_path: Path) -> None:
    """A follower whose tail holds epochs the leader never saw walks back epoch by epoch."""
    sim = Sim(tmp_path, n=3)
    await sim.append(["a0", "a1", "a2", "a3", "a4"])  # epoch 1: offsets 0-4 everywhere
    await sim.catch_up()
    # Broker 2 leads epoch 2 and writes offsets 5-7 alone; broker 1 leads 3 and writes 5 alone;
    # broker 0 leads epoch 4, writes 5-6 alone, and broker 2 comes back to it.
    sim.elect(2)
    await sim.append(["b5", "b6", "b7"])
    sim.elect(1)
    await sim.append(["c5"])
    sim.elect(2)  # epoch 4 on broker 2: writes 8-9
    await sim.append(["d8", "d9"])
    sim.elect(0)  # epoch 5 on broker 0, whose log ends at 5 (epoch 1)
    await sim.append(["e5", "e6"])
    follower = sim.replicas[2].plog
    assert [(e.epoch, e.start_offset) for e in follower.epochs.entries()] == [
        (1, 0),
        (2, 5),
        (4, 8),
    ]
    first = await sim.fetch(2)  # last fetched epoch 4: the leader's largest <= 4 is 1, ends at 5
    assert first.diverging is not None
    assert (first.diverging.epoch, first.diverging.end_offset) == (1, 5)
    assert follower.log_end_offset == 5
    await sim.catch_up()
    values = ["a0", "a1", "a2", "a3", "a4", "e5", "e6"]
    for replica in sim.replicas:
        assert log_values(replica.plog) == values
        assert log_bytes(replica.plog) == log_bytes(sim.leader.plog)
        assert replica.plog.epochs.entries() == [EpochEntry(1, 0), EpochEntry(5, 5)]


async def test_kip279_walk_back_over_an_epoch_the_follower_lacks(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2)
    await sim.append(["x0", "x1"])
    await sim.catch_up()
    sim.elect(1)  # epoch 2 on broker 1: 2-4, replicated
    await sim.append(["y2", "y3", "y4"])
    await sim.catch_up()
    sim.elect(0)  # epoch 3 on broker 0: 5-6 not replicated
    await sim.append(["z5", "z6"])
    sim.elect(1)  # epoch 4 on broker 1: 5 written
    await sim.append(["w5"])
    # Broker 0: epochs 1@0, 2@2, 3@5, end 7. Leader: 1@0, 2@2, 4@5, end 6.
    result = await sim.fetch(0)
    assert result.diverging is not None
    assert (result.diverging.epoch, result.diverging.end_offset) == (2, 5)
    assert sim.replicas[0].plog.log_end_offset == 5
    await sim.catch_up()
    assert log_values(sim.replicas[0].plog) == ["x0", "x1", "y2", "y3", "y4", "w5"]


async def test_a_replica_that_led_briefly_without_writing_drops_that_epoch(
    tmp_path: Path,
) -> None:
    sim = Sim(tmp_path, n=2)
    await sim.append(["a"])
    await sim.catch_up()
    sim.elect(1)  # epoch 2: broker 1 writes nothing
    sim.elect(0)  # epoch 3
    await sim.append(["b"])
    await sim.catch_up()
    assert sim.replicas[1].plog.epochs.entries() == [EpochEntry(1, 0), EpochEntry(3, 1)]
    assert log_bytes(sim.replicas[1].plog) == log_bytes(sim.replicas[0].plog)


async def test_leader_refuses_older_and_newer_epochs_and_old_incarnations(
    tmp_path: Path,
) -> None:
    sim = Sim(tmp_path, n=2)
    await sim.append(["a"])
    follower = sim.replicas[1].follower
    assert follower is not None
    good = follower.fetch_entry()
    older = FetchPartition("t", 0, good.leader_epoch - 1, 0)
    newer = FetchPartition("t", 0, good.leader_epoch + 1, 0)
    assert (await sim.fetch(1, entry=older)).error_code == FencedLeaderEpochError.error_code
    assert sim.replicas[1].outcomes[-1].needs_metadata
    assert (await sim.fetch(1, entry=newer)).error_code == UnknownLeaderEpochError.error_code
    assert sim.replicas[1].outcomes[-1].retry
    assert sim.replicas[1].plog.log_end_offset == 0  # nothing applied
    await sim.fetch(1)
    assert sim.replicas[1].plog.log_end_offset == 1
    # A fetch of an older incarnation after the new one fetched: 40907.
    sim.replicas[1].incarnation += 1
    await sim.fetch(1)
    sim.replicas[1].incarnation -= 1
    assert (await sim.fetch(1)).error_code == StaleBrokerEpochError.error_code
    # A broker that is no replica, and a retired leader: 42101.
    entry = follower.fetch_entry()
    assert sim.lead.handle_fetch(entry, 7, 1, sim.now).error_code == 42101
    old = sim.lead
    sim.elect(1)
    assert old.handle_fetch(entry, 1, 9, sim.now).error_code == 42101


async def test_fetch_past_the_leaders_end_or_before_its_start(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2)
    await sim.append(["a", "b"])
    result = await sim.fetch(1, entry=FetchPartition("t", 0, 1, 9))
    assert result.error_code == OffsetOutOfRangeError.error_code
    assert result.log_end_offset == 2


async def test_follower_behind_the_leaders_log_start_restarts_there(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2)
    await sim.append(["a", "b"])
    await sim.leader.plog.truncate_fully_and_start_at(10)  # as if retention had run
    sim.leader.plog.assign_leader_epoch(sim.leader_epoch)
    await sim.append(["c"])
    await sim.fetch(1)
    assert sim.replicas[1].plog.log_start_offset == 10
    await sim.catch_up()
    assert log_values(sim.replicas[1].plog) == ["c"]


async def test_isr_shrinks_after_the_lag_time_and_grows_when_caught_up(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    await sim.append(["a"])
    await sim.catch_up()
    await sim.append(["b"])
    sim.now += LAG_MS // 2
    await sim.fetch(1)
    assert sim.lead.isr_proposal(sim.now) is None  # broker 2 lags, not for long enough yet
    sim.now += LAG_MS
    await sim.fetch(1)  # broker 1 keeps up
    proposal = sim.lead.isr_proposal(sim.now)
    assert proposal is not None
    assert proposal.isr == (
        IsrMember(BrokerId(0), BrokerEpoch(1)),
        IsrMember(BrokerId(1), BrokerEpoch(1)),
    )
    assert (proposal.leader_id, proposal.leader_epoch, proposal.partition_epoch) == (0, 1, 1)
    # While the shrink is pending, the high watermark still waits for broker 2.
    await sim.append(["c"])
    await sim.fetch(1)
    await sim.fetch(1)
    assert sim.leader.plog.high_watermark == 1
    sim.isr_step(commit=True)
    assert sim.isr == [0, 1]
    assert sim.leader.plog.high_watermark == 3  # over {0, 1}: both hold a, b, c
    # Broker 2 fetches and catches up to the high watermark: proposed back in.
    await sim.fetch(2)
    await sim.fetch(2)
    proposal = sim.lead.isr_proposal(sim.now)
    assert proposal is not None
    assert [m.broker_id for m in proposal.isr] == [0, 1, 2]
    sim.isr_step(commit=True)
    assert sim.isr == [0, 1, 2]


async def test_a_follower_that_stopped_fetching_leaves_the_isr_before_the_lag_time(
    tmp_path: Path,
) -> None:
    """A follower whose fetches stopped (a broken link) is dropped after twice the fetch
    timeout once it is behind, not after replica.lag.time.max.ms; an idle one that has all
    the data is not dropped for its silence."""
    sim = Sim(tmp_path)
    await sim.catch_up()
    lead = sim.lead
    lead.lag_time_max_ms = 60_000
    lead.fetch_timeout_ms = 500
    sim.now += 1500
    assert lead.isr_proposal(sim.now) is None  # silent, but nothing to copy
    await sim.append(["a"])
    await sim.fetch(1)
    await sim.fetch(1)
    sim.now += 200
    await sim.fetch(1)
    proposal = lead.isr_proposal(sim.now)
    assert proposal is not None
    assert [m.broker_id for m in proposal.isr] == [0, 1]
    sim.isr_step(commit=True)
    # Caught up within the (long) lag time, but silent: it no longer holds the high watermark.
    assert sim.leader.plog.high_watermark == sim.leader.plog.log_end_offset


async def test_acks_all_is_answered_when_the_high_watermark_passes(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2, min_isr=2)
    body = bytearray(values_batch(["a", "b"]))
    produce = asyncio.create_task(
        sim.lead.append(body, list(iter_batches(body)), sim.now, acks=-1, timeout_s=30)
    )
    await asyncio.sleep(0)
    assert not produce.done()
    await sim.fetch(1)  # copies the batch
    assert not produce.done()
    await sim.fetch(1)  # reports it: the high watermark passes offset 1
    results = await asyncio.wait_for(produce, 5)
    assert (results[0].base_offset, results[0].last_offset) == (0, 1)


async def test_acks_all_refusals(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2, min_isr=2)
    # ISR shrinks to {0} (broker 1 lags): refused before appending.
    await sim.append(["a"])
    sim.now += 2 * LAG_MS
    sim.isr_step(commit=True)
    assert sim.isr == [0]
    end = sim.leader.plog.log_end_offset
    body = bytearray(values_batch(["x"]))
    with pytest.raises(NotEnoughReplicasError) as refused:
        await sim.lead.append(body, list(iter_batches(body)), sim.now, acks=-1, timeout_s=5)
    assert (refused.value.http_status, refused.value.error_code) == (503, 50303)
    assert sim.leader.plog.log_end_offset == end


async def test_acks_all_after_append_when_the_isr_shrinks(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2, min_isr=2)
    body = bytearray(values_batch(["a"]))
    produce = asyncio.create_task(
        sim.lead.append(body, list(iter_batches(body)), sim.now, acks=-1, timeout_s=30)
    )
    await asyncio.sleep(0)
    sim.now += 2 * LAG_MS  # broker 1 never fetches: out of the ISR; the HW moves over {0}
    sim.isr_step(commit=True)
    with pytest.raises(NotEnoughReplicasAfterAppendError) as info:
        await asyncio.wait_for(produce, 5)
    assert info.value.error_code == 50304
    assert sim.leader.plog.log_end_offset == 1  # appended all the same


async def test_acks_all_fails_with_421_when_leadership_moves(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2)
    body = bytearray(values_batch(["a"]))
    lead = sim.lead
    produce = asyncio.create_task(
        lead.append(body, list(iter_batches(body)), sim.now, acks=-1, timeout_s=30)
    )
    await asyncio.sleep(0)
    sim.elect(1)
    with pytest.raises(NotLeaderOrFollowerError):
        await asyncio.wait_for(produce, 5)
    with pytest.raises(NotLeaderOrFollowerError):
        await lead.append(body, list(iter_batches(body)), sim.now, acks=1, timeout_s=1)


async def test_an_append_waiting_for_the_lock_when_leadership_moves_writes_nothing(
    tmp_path: Path,
) -> None:
    """The lock is held across awaits under ``BROKER_FSYNC=always`` (a truncation waits for a
    sync in flight): an append queued behind it must not land in what is by then a follower's
    log, stamped with the ended epoch and never replicated."""
    sim = Sim(tmp_path, n=2)
    await sim.append(["a"])
    await sim.catch_up()
    lead, plog = sim.lead, sim.leader.plog
    body = bytearray(values_batch(["b"]))
    await plog.lock.acquire()
    produce = asyncio.create_task(
        lead.append(body, list(iter_batches(body)), sim.now, acks=1, timeout_s=5)
    )
    await asyncio.sleep(0)
    sim.elect(1)  # broker 0 follows broker 1 from here on
    plog.lock.release()
    with pytest.raises(NotLeaderOrFollowerError):
        await asyncio.wait_for(produce, 5)
    assert log_values(plog) == ["a"]


async def test_an_ended_leader_epoch_acknowledges_nothing_whatever_the_high_watermark(
    tmp_path: Path,
) -> None:
    """Once a replica follows, its high watermark is its new leader's: an acks=all wait of the
    ended epoch (an append whose fsync outlasted the epoch) is answered 421, not 200."""
    sim = Sim(tmp_path, n=2)
    await sim.append(["a"])
    await sim.catch_up()
    _base, last = await sim.append(["b"])  # on broker 0 alone
    lead = sim.lead
    sim.elect(1)
    await sim.append(["c", "d"])  # the new leader writes over offset 1
    for _ in range(3):
        await sim.fetch(0)  # truncates "b", copies "c" and "d", learns the high watermark
    assert sim.replicas[0].plog.high_watermark > last
    assert "b" not in log_values(sim.replicas[0].plog)
    with pytest.raises(NotLeaderOrFollowerError):
        await lead.wait_for_acks(last, timeout_s=1)


async def test_a_new_leader_reports_no_end_offset_below_an_acknowledged_one(
    tmp_path: Path,
) -> None:
    """The CI failure of issue 27, step by step. Leader 2 appends a batch; follower 1 fetches
    it first (the high watermark cannot move: follower 0 lacks it), then follower 0 does and the
    high watermark passes the batch, so acks=all answers. Follower 1 still knows the earlier
    high watermark -- its fetch is parked until more data arrives. The preferred leader, 1,
    takes the partition back. A reader asking it for the end offset must not be told the old
    high watermark (the acknowledged batch would look lost): the end offset is unknown until
    the followers' first fetches in the new epoch lift the high watermark to its start."""
    sim = Sim(tmp_path)
    sim.elect(2)
    await sim.append(["a"])
    await sim.catch_up()
    body = bytearray(values_batch(["b"]))
    acked = asyncio.create_task(
        sim.lead.append(body, list(iter_batches(body)), sim.now, acks=-1, timeout_s=5)
    )
    await asyncio.sleep(0)
    # Both copy "b"; 1 reports having it first (0 has not said so yet: the high watermark
    # stays), then 0 does and the high watermark passes "b".
    for follower in (1, 0, 1, 0):
        await sim.fetch(follower)
    (result,) = await asyncio.wait_for(acked, 5)
    assert result.last_offset == 1
    assert sim.replicas[1].plog.high_watermark == 1  # below the acknowledged offset
    sim.elect(1)
    assert not sim.lead.high_watermark_known
    assert not await sim.lead.wait_high_watermark_known(0.01)
    await sim.fetch(0)
    await sim.fetch(2)  # diverges nowhere; reports its end
    assert sim.lead.high_watermark_known
    assert sim.leader.plog.high_watermark == 2
    assert log_values(sim.leader.plog, sim.leader.plog.high_watermark) == ["a", "b"]


async def test_acks_all_times_out_with_504(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2)
    body = bytearray(values_batch(["a"]))
    with pytest.raises(RequestTimedOutError) as info:
        await sim.lead.append(body, list(iter_batches(body)), sim.now, acks=-1, timeout_s=0.05)
    assert (info.value.http_status, info.value.error_code) == (504, 50401)
    assert len(sim.lead.acks) == 0


async def test_single_replica_acks_all_is_answered_at_once(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=1)
    body = bytearray(values_batch(["a"]))
    results = await sim.lead.append(body, list(iter_batches(body)), sim.now, acks=-1, timeout_s=5)
    assert results[0].last_offset == 0
    assert sim.leader.plog.high_watermark == 1


async def test_idempotent_retry_at_the_new_leader_is_stored_once(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    await sim.append(["p0", "p1"], pid=42, epoch=0, seq=0)
    await sim.append(["p2"], pid=42, epoch=0, seq=2)
    await sim.catch_up()
    sim.crash(0)  # the leader dies before the producer saw its answer for p2
    assert sim.leader_id == 1
    body = bytearray(values_batch(["p2"], pid=42, epoch=0, seq=2))
    results = await sim.lead.append(body, list(iter_batches(body)), sim.now, acks=1, timeout_s=1)
    assert (results[0].base_offset, results[0].duplicate) == (2, True)
    await sim.append(["p3"], pid=42, epoch=0, seq=3)
    await sim.catch_up()
    for replica in sim.replicas:
        assert log_values(replica.plog) == ["p0", "p1", "p2", "p3"]


async def test_long_poll_fetch_returns_when_the_leader_appends(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2)
    follower = sim.replicas[1].follower
    assert follower is not None
    request = ReplicaFetchRequest(1, 1, [follower.fetch_entry()], max_wait_ms=10_000)

    def not_leader(e: FetchPartition) -> PartitionResult:
        return PartitionResult(e.topic, e.partition, 42101)

    lead = sim.lead
    task = asyncio.create_task(
        serve_fetch(request, lambda _t, _p: lead, not_leader, lambda: sim.now)
    )
    await asyncio.sleep(0.01)
    assert not task.done()
    await sim.append(["a"])
    (result,) = await asyncio.wait_for(task, 5)
    assert result.records
    # A partition this broker does not lead is answered at once, without waiting.
    quick = await serve_fetch(request, lambda _t, _p: None, not_leader, lambda: sim.now)
    assert quick[0].error_code == 42101


async def test_a_closed_leader_log_answers_the_entry_with_an_error(tmp_path: Path) -> None:
    sim = Sim(tmp_path, n=2)
    await sim.append(["a"])
    follower = sim.replicas[1].follower
    assert follower is not None
    await sim.leader.plog.delete()  # the topic was deleted while followers fetch
    result = sim.lead.handle_fetch(follower.fetch_entry(), 1, 1, sim.now)
    assert result.error_code == 40401
    assert not result.records
