"""The Producer: the record accumulator (its caller side) wired to a sender thread.

``Producer`` owns the parts and their lifecycle: the cluster client (which routes each partition's
batches to its leader, :mod:`headwater.client.cluster`), the partition counts
(:mod:`metadata`), the :mod:`accumulator` it extends (``produce()`` and ``produce_many()`` live
there, with the batches they fill), and the :mod:`sender` that ships sealed batches and settles
the :mod:`futures` handed back.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from headwater.client.cluster import ClusterClient
from headwater.closeable import Closeable
from headwater.config import ProducerConfig
from headwater.producer.accumulator import ReadyBatches, RecordAccumulator
from headwater.producer.metadata import PartitionCounts
from headwater.producer.sender import Sender


class Producer(RecordAccumulator, Closeable):
    """Sends records to a Headwater cluster, batched, compressed and (by default) idempotently.

    Contract:

    * ``produce()`` never blocks on the network except to learn a topic's partition count the
      first time, or when ``buffer.memory`` bytes are already waiting (then up to
      ``max.block.ms``). It returns a :class:`DeliveryFuture`.
    * Partition choice: an explicit ``partition`` wins; a key goes to
      ``(murmur2(key) & 0x7fffffff) % partitions`` exactly as Kafka's Java client; records without
      a key use the sticky partitioner.
    * Records of one partition are stored in ``produce()`` order. With ``enable.idempotence``
      (default) a batch that is retried after a timeout or connection error is stored once.
    * ``on_delivery(err, metadata)`` and future callbacks run on a producer worker thread after
      the batch's outcome is known; they should be quick and must not call ``flush()``.
    * Routing: each partition's batches go to its leader (``GET /cluster`` and the topic
      descriptions, read from any of ``bootstrap.servers``); a 421 naming a new leader is
      followed at once, and a leader that stops answering or a partition without a leader (503)
      makes the producer refresh its metadata and retry.
    * Failures: connection errors, 421s and 5xx answers are retried (after ``retry.backoff.ms``
      or the broker's ``Retry-After``) until ``delivery.timeout.ms`` after the record was
      produced (or ``retries`` is exhausted); other errors fail the batch's records with the
      typed error from ``headwater.errors``.
    * ``flush()`` waits for everything produced so far; ``close()`` flushes then stops threads.
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = ProducerConfig.from_dict(config or {})
        cfg = self.config
        self._servers = ClusterClient(
            cfg.bootstrap_servers,
            timeout=cfg.request_timeout_ms / 1000,
            transport=transport,
            client_id=cfg.client_id,
            max_connections=max(cfg.max_in_flight, 2) * 2,
            retry_backoff_ms=cfg.retry_backoff_ms,
        )
        metadata = PartitionCounts(self._servers, cfg.metadata_max_age_ms)
        super().__init__(cfg, metadata)
        self._sender = Sender(cfg, ReadyBatches(self), self._servers, metadata.refresh_stale)
        self._sender.start()

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``), then stop the sender and close connections."""
        if self._closed:
            return
        self.flush(timeout)
        self._stop_appends()
        self._sender.stop()
        self._servers.close()

    def __len__(self) -> int:
        """Batches produced but not yet acknowledged or failed."""
        return self._unfinished
