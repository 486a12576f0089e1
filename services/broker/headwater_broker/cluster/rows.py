"""Rows of the metadata tables and the typed states they hold, both ways.

The controller's writes and every reader of the store go through these, so a column's meaning
is written once: ``*_row`` builds the row of a state, ``*_state`` reads one back; replica lists
are comma-separated broker ids; change bodies are JSON. ``update_partition`` is the
compare-and-set of every partition write (on its leader and partition epochs).
"""

from __future__ import annotations

from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from headwater.errors import StalePartitionEpochError
from headwater.types import BrokerId, PartitionId
from headwater_broker.cluster import tables as t
from headwater_broker.cluster.changes import Change, PartitionWrite, decode_record
from headwater_broker.cluster.state import (
    BrokerEpoch,
    BrokerState,
    BrokerStateName,
    ChangeOffset,
    ControllerEpoch,
    LeaderEpoch,
    PartitionEpoch,
    PartitionState,
    TopicState,
)


def json(value: Any) -> str:
    return orjson.dumps(value).decode()


def change(row: Any) -> Change:
    return Change(
        ChangeOffset(int(row.offset)),
        ControllerEpoch(int(row.controller_epoch)),
        decode_record(str(row.kind), orjson.loads(row.body)),
    )


def broker_row(b: BrokerState) -> dict[str, Any]:
    return {
        "broker_id": b.broker_id,
        "incarnation": b.incarnation,
        "epoch": b.epoch,
        "url": b.url,
        "rack": b.rack,
        "state": b.state.value,
        "fenced_change": b.fenced_change,
    }


def broker_state(row: Any) -> BrokerState:
    return BrokerState(
        broker_id=BrokerId(row.broker_id),
        epoch=BrokerEpoch(row.epoch),
        incarnation=str(row.incarnation),
        url=str(row.url),
        rack=row.rack,
        state=BrokerStateName(row.state),
        fenced_change=ChangeOffset(row.fenced_change),
    )


def topic_row(topic: TopicState) -> dict[str, Any]:
    return {
        "name": topic.name,
        "topic_id": topic.topic_id,
        "partitions": topic.partitions,
        "configs": json(dict(sorted(topic.configs.items()))),
    }


def topic_state(row: Any) -> TopicState:
    configs = {str(k): str(v) for k, v in orjson.loads(row.configs).items()}
    return TopicState(str(row.name), str(row.topic_id), int(row.partitions), configs)


def partition_row(p: PartitionState) -> dict[str, Any]:
    return {
        "topic_id": p.topic_id,
        "partition": p.partition,
        "topic": p.topic,
        "replicas": json(list(p.replicas)),
        "isr": json(list(p.isr)),
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "adding": json(list(p.adding)),
        "removing": json(list(p.removing)),
        "unclean": p.unclean,
    }


def partition_state(row: Any) -> PartitionState:
    def ids(text: str) -> tuple[BrokerId, ...]:
        return tuple(BrokerId(int(v)) for v in orjson.loads(text))

    return PartitionState(
        topic=str(row.topic),
        topic_id=str(row.topic_id),
        partition=PartitionId(row.partition),
        replicas=ids(row.replicas),
        isr=ids(row.isr),
        leader=BrokerId(row.leader),
        leader_epoch=LeaderEpoch(row.leader_epoch),
        partition_epoch=PartitionEpoch(row.partition_epoch),
        adding=ids(row.adding),
        removing=ids(row.removing),
        unclean=bool(row.unclean),
    )


def update_partition(conn: Connection, write: PartitionWrite) -> None:
    before = write.before
    assert before is not None
    p = t.partitions.c
    updated = conn.execute(
        sa.update(t.partitions)
        .where(
            p.topic_id == before.topic_id,
            p.partition == before.partition,
            p.leader_epoch == before.leader_epoch,
            p.partition_epoch == before.partition_epoch,
        )
        .values(partition_row(write.after))
    )
    if updated.rowcount != 1:
        raise StalePartitionEpochError(
            f"Partition {before.topic}-{before.partition} is no longer at leader epoch "
            f"{before.leader_epoch}, partition epoch {before.partition_epoch}"
        )


def upsert(conn: Connection, table: sa.Table, key: dict[str, Any], row: dict[str, Any]) -> None:
    # Only the controller writes these tables and its row lock serializes it, so update-then-
    # insert cannot race another writer.
    where = [table.c[k] == v for k, v in key.items()]
    if conn.execute(sa.update(table).where(*where).values(row)).rowcount == 0:
        conn.execute(sa.insert(table).values(row))
