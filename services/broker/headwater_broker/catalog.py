"""What a broker's data directory says about the cluster: its identity, replicas' topic ids,
and the import of a catalog written before brokers formed a cluster.

Files (each written to a temporary name, fsynced, then renamed)::

    meta.properties              "cluster.id=<uuid>" and "broker.id=<n>" lines, as Kafka's:
                                 written at the first start; a later start against metadata of
                                 another cluster (a new database, a wrong BROKER_METADATA_URL) is
                                 refused instead of deleting every replica as a stray
    <topic>-<p>/partition.metadata
                                 "version: 0" and "topic_id: <uuid>" lines, as Kafka's: a
                                 directory left by a deleted topic is never mistaken for the
                                 replica of a new topic of the same name
    topics.json                  the single-broker catalog of earlier versions; its topics are
                                 created in the cluster metadata (replicas: this broker) at the
                                 first start, then the file is renamed topics.json.imported
    producers.json               the single-broker producer ids; the cluster's id counter is
                                 moved past them at import, so no id is issued twice
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

import orjson

from headwater.errors import HeadwaterError, TopicAlreadyExistsError
from headwater.types import BrokerId
from headwater_broker.cluster import producer_ids
from headwater_broker.cluster.image import MetadataImage
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.log.local_log import fsync_directory
from headwater_broker.log.partition import PartitionLog
from headwater_broker.peers import Peers
from headwater_broker.settings import BrokerSettings

log = logging.getLogger("headwater.broker")


class Admin(Protocol):
    """Topic admin as the catalog import uses it (``topic_admin.TopicAdmin``)."""

    async def controller_url(self) -> str | None: ...

    async def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: dict[str, Any] | None = None,
        replica_assignment: list[list[int]] | None = None,
    ) -> object: ...


class Host(Protocol):
    """What the catalog needs of the broker it runs in (the broker passes itself)."""

    @property
    def data_dir(self) -> Path: ...
    @property
    def broker_id(self) -> BrokerId: ...
    @property
    def settings(self) -> BrokerSettings: ...
    @property
    def peers(self) -> Peers: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def node(self) -> ClusterNode: ...

    def all_partitions(self) -> list[PartitionLog]: ...

    @property
    def admin(self) -> Admin: ...


META = "meta.properties"
PARTITION_METADATA = "partition.metadata"


class ClusterMismatchError(RuntimeError):
    """The data directory belongs to another cluster (or another broker id)."""


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)


def _properties(path: Path, sep: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(sep)
        if key.strip() and not key.startswith("#"):
            found[key.strip()] = value.strip()
    return found


def check_cluster_id(data_dir: Path, cluster_id: str, broker_id: int) -> None:
    """Record the cluster this directory belongs to, or refuse another cluster's metadata."""
    path = data_dir / META
    if not path.exists():
        _write_atomically(path, f"version=1\ncluster.id={cluster_id}\nbroker.id={broker_id}\n")
        return
    props = _properties(path, "=")
    if props.get("cluster.id") != cluster_id or props.get("broker.id") != str(broker_id):
        raise ClusterMismatchError(
            f"{data_dir} belongs to broker {props.get('broker.id')} of cluster "
            f"{props.get('cluster.id')}, but this is broker {broker_id} and the metadata store "
            f"holds cluster {cluster_id}: check BROKER_METADATA_URL and BROKER_ID (or give the "
            "broker an empty data directory)"
        )


def topic_id_of(directory: Path) -> str | None:
    path = directory / PARTITION_METADATA
    if not path.exists():
        return None
    return _properties(path, ":").get("topic_id")


def claim_directory(directory: Path, topic_id: str) -> None:
    """Make ``directory`` the replica directory of ``topic_id``.

    A directory of another topic id (a deleted topic of the same name) is removed first; one
    without a topic id (written before the cluster) is adopted.
    """
    existing = topic_id_of(directory) if directory.exists() else None
    if existing == topic_id:
        return
    if existing is not None:
        log.info("removing %s: it held topic id %s, not %s", directory, existing, topic_id)
        doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}.deleted")
        directory.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    if not directory.exists():
        directory.mkdir(parents=True)
        # The new directory's own entry: without this fsync of the data directory a power loss
        # may take the replica away whole, whatever was fsynced inside it.
        fsync_directory(directory.parent)
    _write_atomically(directory / PARTITION_METADATA, f"version: 0\ntopic_id: {topic_id}\n")


def remove_strays(broker: Host) -> list[Path]:
    """Delete replica directories whose topic id this broker no longer hosts (a topic deleted,
    or a replica moved away, while the broker was down)."""
    hosted = {plog.directory for plog in broker.all_partitions()}
    removed = []
    for directory in sorted(broker.data_dir.iterdir()):
        if not directory.is_dir() or directory in hosted or topic_id_of(directory) is None:
            continue
        log.info("removing stray replica directory %s", directory)
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory)
    return removed


async def import_catalog(broker: Host) -> list[str]:
    """Create the topics of a pre-cluster ``topics.json`` in the cluster, replicas on this broker.

    Returns the names imported. Runs once: the file is renamed when every topic is in the
    metadata. Topics the metadata already has (an import interrupted after some) are skipped.
    """
    path = broker.data_dir / "topics.json"
    if not path.exists():
        return []
    entries = orjson.loads(path.read_bytes()).get("topics", {})
    await _burn_old_producer_ids(broker)
    imported = []
    for name, entry in sorted(entries.items()):
        if broker.image.topic(name) is not None:
            continue
        count = int(entry["partitions"])
        configs = {str(k): str(v) for k, v in dict(entry.get("configs") or {}).items()}
        assignment: list[list[int]] = [[int(broker.broker_id)] for _ in range(count)]
        await _create_at_controller(broker, name, count, configs, assignment)
        imported.append(name)
        log.info("imported topic %s (%d partition(s)) into the cluster metadata", name, count)
    os.replace(path, path.with_name("topics.json.imported"))
    fsync_directory(broker.data_dir)
    return imported


async def _burn_old_producer_ids(broker: Host) -> None:
    path = broker.data_dir / "producers.json"
    if not path.exists():
        return
    next_id = int(orjson.loads(path.read_bytes()).get("next_id", 0))
    if next_id > 0:
        store = broker.node.store
        await store.call(producer_ids.allocate_block, store, next_id)
    os.replace(path, path.with_name("producers.json.imported"))


async def _create_at_controller(
    broker: Host,
    name: str,
    count: int,
    configs: dict[str, str],
    assignment: list[list[int]],
) -> None:
    deadline = time.monotonic() + broker.settings.startup_timeout_ms / 1000
    while True:
        try:
            url = await broker.admin.controller_url()
            if url is None:
                await broker.admin.create_topic(
                    name, count, len(assignment[0]), configs, assignment
                )
            else:
                await broker.peers.create_topic(url, name, count, configs, assignment)
            return
        except TopicAlreadyExistsError:
            return  # an interrupted import got this far, or someone created it meanwhile
        except HeadwaterError as exc:
            if exc.http_status != 503 or time.monotonic() > deadline:
                raise
            await asyncio.sleep(broker.settings.heartbeat_interval_ms / 1000)
