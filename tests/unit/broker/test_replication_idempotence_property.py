"""Random schedules of idempotent acks=all produces (and their retries), fetches, clock ticks,
ISR changes, clean elections and crash-restarts over three replicas, min.insync.replicas 2.

Checked at every step, not only at the end (the properties that would have caught issue 27's
failure, whichever of them it had been):

- after any truncation, a replica's producer state equals the state rebuilt from what is left of
  its log (a duplicate is never judged against a batch that was cut);
- no acks=all answer for an offset that fewer than min.insync.replicas members of the committed
  in-sync set hold, byte for byte as the leader stored it;
- no duplicate answer for a sequence whose batch is not in the answering leader's log at the
  offsets it names;
- an end offset a leader reports (its high watermark once known) never goes backwards, across
  leader changes included (KIP-207);

and after healing: every acknowledged batch is in the log once, in acknowledged order, and the
replicas are identical.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater.errors import HeadwaterError
from headwater.records.batch import iter_batches
from headwater_broker.log.partition import AppendResult, PartitionLog
from headwater_broker.log.producer_state import ProducerStateTable
from tests.unit.broker.replication_sim import LAG_MS, Sim, log_bytes, log_values, values_batch

MIN_ISR = 2
PRODUCERS = 2

Op = tuple[str, int, int]

_produce = st.tuples(st.just("produce"), st.integers(0, PRODUCERS - 1), st.integers(1, 3))
_fetch = st.tuples(st.just("fetch"), st.integers(0, 2), st.sampled_from([1, 150, 1 << 20]))
_elect = st.tuples(st.just("elect"), st.integers(0, 2), st.just(0))
# Produces, fetches and clean elections drawn more often than the other steps, so that
# histories carry answered produces across leader changes (where every property bites).
ops = st.lists(
    st.one_of(
        _produce,
        _produce,
        _produce,
        _fetch,
        _fetch,
        _fetch,
        _fetch,
        _elect,
        _elect,
        st.tuples(st.just("tick"), st.integers(1, 2 * LAG_MS), st.just(0)),
        st.tuples(st.just("isr"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("crash"), st.integers(0, 2), st.just(0)),
    ),
    min_size=20,
    max_size=100,
)


@dataclass
class Idempotent:
    """One idempotent producer: its next sequence, and the batch it is retrying, if any."""

    pid: int
    next_seq: int = 0
    values: list[str] | None = None  # the batch in flight or to retry
    task: asyncio.Task[list[AppendResult]] | None = None
    acknowledged: list[list[str]] = field(default_factory=list)


def stored_batches(plog: PartitionLog) -> dict[int, tuple[int, int, int, list[str]]]:
    """base offset -> (producer id, base sequence, last offset, values) of every stored batch."""
    data = log_bytes(plog)
    out: dict[int, tuple[int, int, int, list[str]]] = {}
    values = log_values(plog)
    i = 0
    for _pos, header in iter_batches(data):
        n = header.records_count
        out[header.base_offset] = (
            header.producer_id,
            header.base_sequence,
            header.last_offset,
            values[i : i + n],
        )
        i += n
    return out


def rebuilt_state(plog: PartitionLog) -> dict[int, tuple[int, list[tuple[int, int, int, int]]]]:
    table = ProducerStateTable()
    table.replay(h for _pos, h in iter_batches(log_bytes(plog)))
    return _state(table)


def _state(table: ProducerStateTable) -> dict[int, tuple[int, list[tuple[int, int, int, int]]]]:
    return {
        pid: (e.epoch, [(b.first_seq, b.last_seq, b.base_offset, b.last_offset) for b in e.batches])
        for pid, e in table.entries.items()
    }


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def run(history: list[Op], root: Path) -> None:
    sim = Sim(root, segment_bytes=400, min_isr=MIN_ISR)
    producers = [Idempotent(pid=100 + p) for p in range(PRODUCERS)]
    acknowledged: list[list[str]] = []
    known_end = 0
    counter = 0

    def judge(producer: Idempotent) -> None:
        """Check an answered produce against the properties; record what was acknowledged."""
        task = producer.task
        assert task is not None
        assert task.done()
        assert producer.values is not None
        producer.task = None
        try:
            (result,) = task.result()
        except HeadwaterError:
            return  # 421, 503, 504: not acknowledged, retried later with the same sequence
        leader = sim.leader
        batches = stored_batches(leader.plog)
        stored = batches.get(result.base_offset)
        # Whether new or a duplicate, the answer names where this very batch is.
        assert stored is not None, (
            f"answer names offset {result.base_offset}: no batch starts there"
        )
        assert stored[:3] == (producer.pid, producer.next_seq, result.last_offset), stored
        assert stored[3] == producer.values
        holders = [
            b
            for b in sim.isr
            if stored_batches(sim.replicas[b].plog).get(result.base_offset) == stored
        ]
        assert len(holders) >= MIN_ISR, f"acknowledged on {holders} of in-sync set {sim.isr}"
        acknowledged.append(producer.values)
        producer.acknowledged.append(producer.values)
        producer.next_seq += len(producer.values)
        producer.values = None

    for kind, a, b in history:
        if kind == "produce":
            producer = producers[a]
            if producer.task is None:
                if producer.values is None:
                    producer.values = [f"p{a}-v{counter + i}" for i in range(b)]
                    counter += b
                body = bytearray(
                    values_batch(producer.values, pid=producer.pid, epoch=0, seq=producer.next_seq)
                )
                producer.task = asyncio.create_task(
                    sim.lead.append(body, list(iter_batches(body)), sim.now, acks=-1, timeout_s=60)
                )
        elif kind == "fetch":
            replica = sim.replicas[a]
            if replica.follower is not None:
                await sim.fetch(a, b)
                outcome = replica.outcomes[-1]
                if outcome.truncated_to is not None:
                    assert _state(replica.plog.producers) == rebuilt_state(replica.plog)
        elif kind == "tick":
            sim.now += a
        elif kind == "isr":
            sim.isr_step(commit=bool(a))
        elif kind == "elect":
            if a in sim.isr and a != sim.leader_id:
                sim.elect(a)
        elif kind == "crash":
            sim.crash(a)
            replica = sim.replicas[a]
            assert _state(replica.plog.producers) == rebuilt_state(replica.plog)
        await settle()
        for producer in producers:
            if producer.task is not None and producer.task.done():
                judge(producer)
        lead = sim.lead
        if lead.high_watermark_known:
            assert lead.plog.high_watermark >= known_end, "the end offset went backwards"
            known_end = lead.plog.high_watermark

    # Heal: every producer's pending batch is retried until answered.
    for _ in range(20):
        await sim.catch_up(rounds=200)
        await settle()
        pending = False
        for producer in producers:
            if producer.task is not None and producer.task.done():
                judge(producer)
            if producer.values is not None and producer.task is None:
                pending = True
                body = bytearray(
                    values_batch(producer.values, pid=producer.pid, epoch=0, seq=producer.next_seq)
                )
                producer.task = asyncio.create_task(
                    sim.lead.append(body, list(iter_batches(body)), sim.now, acks=-1, timeout_s=60)
                )
            elif producer.task is not None:
                pending = True
        if not pending:
            break
    assert all(p.task is None and p.values is None for p in producers), "a produce never answered"

    final = log_values(sim.leader.plog)
    assert len(final) == len(set(final)), "a value stored twice"
    positions = {v: i for i, v in enumerate(final)}
    for batch in acknowledged:
        assert all(v in positions for v in batch), f"acknowledged but lost: {batch}"
    for producer in producers:
        order = [positions[batch[0]] for batch in producer.acknowledged]
        assert order == sorted(order), "a producer's batches out of order"
    leader_bytes = log_bytes(sim.leader.plog)
    for replica in sim.replicas:
        assert log_bytes(replica.plog) == leader_bytes


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops)
def test_idempotent_acks_all_under_any_clean_history(history: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(run(history, Path(root)))
