"""The cluster metadata tables (SQLAlchemy Core), shared by SQLite and PostgreSQL.

Who writes what (docs/cluster.md, "Metadata store")::

    cluster          one row (id = 1): cluster_id, next_producer_id, schema_version
                     -- created once; next_producer_id by any broker (atomic increment)
    controller       one row (id = 1): broker_id (-1 none), epoch, lease_until_ms, last_change
                     -- elections (CAS on the lease); every controller write (CAS on epoch)
    brokers          broker_id PK | incarnation | epoch | url | rack | state | fenced_change
                     -- the controller only: a broker as the change log recorded it
    broker_sessions  broker_id PK | incarnation | epoch | url | rack | heartbeat_ms | applied_change
                     -- the broker itself (registration; heartbeats CAS on incarnation + epoch)
    peer_reports     broker_id PK | epoch | unreachable (JSON list of broker ids)
                     -- the broker itself, with a heartbeat: the leaders it cannot fetch from
    topics           name PK | topic_id UNIQUE | partitions | configs (JSON)      -- controller
    partitions       (topic_id, partition) PK | topic | replicas | isr (JSON lists) | leader
                     | leader_epoch | partition_epoch | adding | removing | unclean  -- controller
    changes          offset PK (gapless from 1) | controller_epoch | kind | body (JSON)
                     | created_ms                                                  -- controller
    producers        producer_id PK | epoch | last_used_ms      -- any broker (CAS on epoch)

Every table the metadata image is built from (controller, brokers, topics, partitions) is written
only in the transaction that appends the matching change, so a snapshot and the log agree.
Times are milliseconds on the database's clock.
"""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 1

metadata = sa.MetaData()

cluster = sa.Table(
    "cluster",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("cluster_id", sa.String(36), nullable=False),
    sa.Column("next_producer_id", sa.BigInteger, nullable=False),
    sa.Column("schema_version", sa.Integer, nullable=False),
)

controller = sa.Table(
    "controller",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("broker_id", sa.Integer, nullable=False),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("lease_until_ms", sa.BigInteger, nullable=False),
    sa.Column("last_change", sa.BigInteger, nullable=False),
)

brokers = sa.Table(
    "brokers",
    metadata,
    sa.Column("broker_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("incarnation", sa.String(36), nullable=False),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("url", sa.String(1024), nullable=False),
    sa.Column("rack", sa.String(255), nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("fenced_change", sa.BigInteger, nullable=False),
)

broker_sessions = sa.Table(
    "broker_sessions",
    metadata,
    sa.Column("broker_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("incarnation", sa.String(36), nullable=False),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("url", sa.String(1024), nullable=False),
    sa.Column("rack", sa.String(255), nullable=True),
    sa.Column("heartbeat_ms", sa.BigInteger, nullable=False),
    sa.Column("applied_change", sa.BigInteger, nullable=False),
)

# Added after schema version 1 without changing it: create_all adds a missing table to an older
# database, and nothing else reads it.
peer_reports = sa.Table(
    "peer_reports",
    metadata,
    sa.Column("broker_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("unreachable", sa.Text, nullable=False),
)

topics = sa.Table(
    "topics",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("topic_id", sa.String(36), nullable=False, unique=True),
    sa.Column("partitions", sa.Integer, nullable=False),
    sa.Column("configs", sa.Text, nullable=False),
)

partitions = sa.Table(
    "partitions",
    metadata,
    sa.Column("topic_id", sa.String(36), primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("topic", sa.String(255), nullable=False),
    sa.Column("replicas", sa.Text, nullable=False),
    sa.Column("isr", sa.Text, nullable=False),
    sa.Column("leader", sa.Integer, nullable=False),
    sa.Column("leader_epoch", sa.BigInteger, nullable=False),
    sa.Column("partition_epoch", sa.BigInteger, nullable=False),
    sa.Column("adding", sa.Text, nullable=False),
    sa.Column("removing", sa.Text, nullable=False),
    sa.Column("unclean", sa.Boolean, nullable=False),
)

changes = sa.Table(
    "changes",
    metadata,
    sa.Column("offset", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("controller_epoch", sa.BigInteger, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False, index=True),
)

producers = sa.Table(
    "producers",
    metadata,
    sa.Column("producer_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("last_used_ms", sa.BigInteger, nullable=False),
)
