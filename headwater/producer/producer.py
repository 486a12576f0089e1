"""The Producer: the record accumulator (its caller side) wired to a sender thread.

``Producer`` owns the parts and their lifecycle: the cluster client (which routes each partition's
batches to its leader, :mod:`headwater.client.cluster`), the partition counts
(:mod:`metadata`), the :mod:`accumulator` it extends (``produce()`` and ``produce_many()`` live
there, with the batches they fill), and the :mod:`sender` that ships sealed batches and settles
the :mod:`futures` handed back, and the delivery :mod:`reports` that ``poll()`` and ``flush()``
serve.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import httpx

from headwater.client.cluster import ClusterClient
from headwater.closeable import Closeable
from headwater.cluster_metadata import ClusterMetadata, describe_cluster
from headwater.config import ProducerConfig
from headwater.producer.accumulator import ReadyBatches, RecordAccumulator
from headwater.producer.metadata import PartitionCounts
from headwater.producer.sender import Sender


class Producer(RecordAccumulator, Closeable):
    """Sends records to a Headwater cluster, batched, compressed and (by default) idempotently.

    Contract:

    * ``produce(topic, value=None, key=None, partition=-1, on_delivery=None, timestamp=0,
      headers=None)`` has confluent-kafka's parameters (``callback=`` is ``on_delivery``'s other
      name). It never blocks on the network except to learn a topic's partition count the
      first time, or when ``buffer.memory`` bytes are already waiting (then up to
      ``max.block.ms``). It returns a :class:`DeliveryFuture` (confluent-kafka's returns None).
    * Partition choice: an explicit ``partition`` (>= 0) wins; a key goes to
      ``(murmur2(key) & 0x7fffffff) % partitions`` exactly as Kafka's Java client; records without
      a key use the sticky partitioner.
    * Records of one partition are stored in ``produce()`` order. With ``enable.idempotence``
      (default) a batch that is retried after a timeout or connection error is stored once.
    * ``on_delivery(err, msg)`` runs on the thread that calls ``poll()`` or ``flush()``, as in
      confluent-kafka (``msg`` is a :class:`~headwater.message.Message`); ``poll(timeout)``
      serves the reports that arrived and returns how many. ``DeliveryFuture`` callbacks
      (``add_done_callback``) run on a producer worker thread instead.
    * Routing: each partition's batches go to its leader (``GET /cluster`` and the topic
      descriptions, read from any of ``bootstrap.servers``); a 421 naming a new leader is
      followed at once, and a leader that stops answering or a partition without a leader (503)
      makes the producer refresh its metadata and retry.
    * Failures: connection errors, 421s and 5xx answers are retried (after ``retry.backoff.ms``
      or the broker's ``Retry-After``) until ``delivery.timeout.ms`` after the record was
      produced (or ``retries`` is exhausted); other errors fail the batch's records with the
      typed error from ``headwater.errors``.
    * ``flush(timeout)`` waits for everything produced so far and serves its delivery reports;
      it returns ``len(producer)``: records not yet acknowledged plus reports not yet served
      (0 when done). ``close()`` flushes then stops threads.
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = ProducerConfig.from_dict(config or {})
        cfg = self.config
        self._servers = ClusterClient.of_client(
            cfg, transport=transport, max_connections=max(cfg.max_in_flight, 2) * 2
        )
        metadata = PartitionCounts(self._servers, cfg.metadata_max_age_ms)
        super().__init__(cfg, metadata)
        self._sender = Sender(cfg, ReadyBatches(self), self._servers, metadata.refresh_stale)
        self._sender.start()

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``), then stop the sender and close connections."""
        if self._closed:
            return
        try:
            self.flush(timeout)  # a delivery callback that raises reaches the caller from here
        finally:
            self._stop_appends()
            self._sender.stop()
            self._servers.close()

    def poll(self, timeout: float | None = None) -> int:
        """Run the delivery callbacks whose reports arrived, waiting up to ``timeout`` seconds
        (``None``/``-1``: forever) for one if none has; how many ran."""
        return self._reports.serve(None if timeout is None or timeout < 0 else timeout)

    def flush(self, timeout: float | None = None) -> int:
        """Send everything queued, wait for the outcome and serve its delivery reports, for up
        to ``timeout`` seconds (``None``/``-1``: as long as it takes); ``len(self)`` after."""
        if timeout is not None and timeout < 0:
            timeout = None
        deadline = None if timeout is None else time.monotonic() + timeout
        self._flush_batches(timeout)
        self._reports.drain(deadline)
        return len(self)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's topics (or just ``topic``) with their partitions, as
        ``AdminClient.list_topics``."""
        return describe_cluster(self._servers, topic)

    def __len__(self) -> int:
        """Records produced and not yet acknowledged or failed, plus delivery reports not yet
        served (confluent-kafka's count)."""
        return self._records_unacked + self._reports.ready()
