"""Random histories of appends, fetches, clock ticks, ISR changes, clean leader changes and
crash-restarts over three replicas on real directories; after healing, Jepsen's checks:

- every acknowledged record is in the log, once, in acknowledged order;
- no record any replica exposed below its high watermark is missing later (what consumers saw);
- the replicas' logs and leader-epoch checkpoints are identical.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater_broker.log.leader_epoch import EpochEntry
from headwater_broker.replication.leader import PartitionLeader
from tests.unit.broker.replication_sim import LAG_MS, Replica, Sim, log_bytes, log_values

Op = tuple[str, int, int]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3), st.just(0)),
        st.tuples(st.just("fetch"), st.integers(0, 2), st.sampled_from([1, 150, 1 << 20])),
        st.tuples(st.just("tick"), st.integers(1, 2 * LAG_MS), st.just(0)),
        st.tuples(st.just("isr"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("elect"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("crash"), st.integers(0, 2), st.just(0)),
    ),
    min_size=5,
    max_size=60,
)


@dataclass
class Pending:
    leader: PartitionLeader
    last_offset: int
    values: list[str]


async def run(history: list[Op], root: Path) -> None:
    sim = Sim(root, segment_bytes=400)
    counter = 0
    pending: list[Pending] = []
    acknowledged: list[str] = []
    seen_prefixes: list[list[str]] = []
    for kind, a, b in history:
        if kind == "append":
            values = [f"v{counter + i}" for i in range(a)]
            counter += a
            _base, last = await sim.append(values)
            pending.append(Pending(sim.lead, last, values))
        elif kind == "fetch":
            if sim.replicas[a].follower is not None:
                await sim.fetch(a, b)
        elif kind == "tick":
            sim.now += a
        elif kind == "isr":
            sim.isr_step(commit=bool(a))
        elif kind == "elect":
            if a in sim.isr and a != sim.leader_id:
                sim.elect(a)
        elif kind == "crash":
            sim.crash(a)
        # acks=all, min ISR 1: answered once the high watermark of the leader it was appended
        # to passes it; a leader that resigned first answers 421 (not acknowledged).
        for p in list(pending):
            if p.leader.resigned:
                pending.remove(p)
            elif p.leader.plog.high_watermark > p.last_offset:
                pending.remove(p)
                acknowledged.extend(p.values)
        for replica in sim.replicas:
            seen_prefixes.append(log_values(replica.plog, replica.plog.high_watermark))
    await sim.catch_up(rounds=200)
    final = log_values(sim.leader.plog)
    assert len(final) == len(set(final))
    positions = {v: i for i, v in enumerate(final)}
    missing = [v for v in acknowledged if v not in positions]
    assert not missing, f"acknowledged but lost: {missing}"
    order = [positions[v] for v in acknowledged]
    assert order == sorted(order), "acknowledged records out of order"
    for prefix in seen_prefixes:
        assert final[: len(prefix)] == prefix, "a record below a high watermark vanished"
    leader_bytes = log_bytes(sim.leader.plog)
    end = sim.leader.plog.log_end_offset

    def written(replica: Replica) -> list[EpochEntry]:
        # An epoch that has written nothing yet (a leader's newest) is known to the leader only.
        return [e for e in replica.plog.epochs.entries() if e.start_offset < end]

    for replica in sim.replicas:
        assert log_bytes(replica.plog) == leader_bytes
        assert written(replica) == written(sim.leader)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops)
def test_acknowledged_records_survive_any_clean_history(history: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(run(history, Path(root)))
