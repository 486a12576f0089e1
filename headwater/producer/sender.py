"""The sender: takes ready batches from the accumulator and gets them acknowledged.

Threads and flow::

    sender thread: wait_for_requests() --> number the batches (idempotence) --> worker pool:
    encode (+compress) once, POST .../batches, retry the same bytes on failure --> set each
    batch's outcome, release it to the accumulator, run its callbacks (on the worker thread)

Idempotence (default on): the producer gets ``(producer_id, epoch)`` from ``POST /producers``
and numbers each partition's records; a retried batch carries the same sequence, so the broker
stores it once and answers with the original offsets. To keep that exact, an idempotent producer
has one request in flight per partition (the accumulator holds the next one back); batches that
queue up behind it leave together in the next request (up to 5: the batch route takes several
concatenated), and different partitions are sent in parallel. If the broker has forgotten the
producer id (expired), a new one is taken and the request renumbered, as Kafka's producer does
on UNKNOWN_PRODUCER_ID.

Routing: each request goes to its partition's leader (``ClusterClient.leader``). A failed attempt
asks ``ClusterClient.retry_delay`` what to do: a 421 naming a newer leader is resent there at
once; a leader that does not answer, a partition without a leader (503 50302) and the other
retriable answers wait ``retry.backoff.ms`` (or ``Retry-After``) and go to the leader the
refreshed metadata names. The retried request carries the same bytes -- the same producer id,
epoch and sequence -- so the new leader, which holds the partition's producer state, stores it
once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from headwater.client.broker import BatchAck, BrokerClient, ProducerIdentity
from headwater.client.cluster import ClusterClient
from headwater.config import ProducerConfig
from headwater.errors import HeadwaterError, UnknownProducerIdError, UnknownServerError
from headwater.producer.accumulator import ProduceRequest, ReadyBatches
from headwater.producer.batch import BatchSequence, ProducerBatch
from headwater.records.encoder import encode_batch, encode_values_batch

log = logging.getLogger("headwater.producer")


class DeliveryTimeoutError(TimeoutError):
    """The record was not acknowledged within ``delivery.timeout.ms``."""


class Sender:
    """Sends what ``ready`` has to ``servers``, until its accumulator is closed and drained.
    ``before_round`` runs before each wait for requests (metadata upkeep)."""

    def __init__(
        self,
        config: ProducerConfig,
        ready: ReadyBatches,
        servers: ClusterClient,
        before_round: Callable[[], None],
    ) -> None:
        self._config = config
        self._ready = ready
        self._servers = servers
        self._before_round = before_round
        self._lock = threading.Lock()  # guards identity and sequences
        self._identity_lock = threading.Lock()  # one producer id fetch at a time
        self.identity: ProducerIdentity | None = None
        self._sequences: dict[tuple[str, int], int] = {}
        self._workers = ThreadPoolExecutor(
            max_workers=max(config.max_in_flight, 2), thread_name_prefix="headwater-producer"
        )
        self._thread = threading.Thread(
            target=self._run, name="headwater-producer-sender", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Wait for the thread (it ends once the accumulator is closed and drained) and the
        workers."""
        self._thread.join(timeout=5)
        self._workers.shutdown(wait=True)

    def _run(self) -> None:
        while True:
            self._before_round()
            requests = self._ready.wait_for_requests()
            if requests is None:
                return
            for request in requests:
                self._dispatch(request)

    # -- idempotence --------------------------------------------------------------------------

    def _dispatch(self, request: ProduceRequest) -> None:
        if self._config.enable_idempotence:
            try:
                identity = self._producer_identity(request.batches[0])
            except Exception as exc:  # the batches carry the error to their futures
                self._finish(request, [], exc)
                return
            self._number(request, identity, only_new=True)
        self._workers.submit(self._send, request)

    def _number(self, request: ProduceRequest, identity: ProducerIdentity, only_new: bool) -> None:
        """Give ``request``'s batches their sequences under ``identity`` (``only_new``: keep those
        a retry already encoded)."""
        tp = (request.topic, request.partition)
        with self._lock:
            sequence = self._sequences.get(tp, 0)
            for batch in request.batches:
                if not only_new or batch.encoded is None:
                    batch.sequence = BatchSequence(
                        identity.producer_id, identity.producer_epoch, sequence
                    )
                    batch.encoded = None
                    sequence = (sequence + len(batch.values)) & 0x7FFFFFFF
            self._sequences[tp] = sequence

    def _producer_identity(self, batch: ProducerBatch) -> ProducerIdentity:
        """The producer id and epoch, fetched once (retried like a batch until its deadline)."""
        identity = self.identity
        if identity is not None:
            return identity
        deadline = batch.created + self._config.delivery_timeout_ms / 1000
        # One fetch at a time: sequences count from 0 under each new id, so two threads must not
        # each install an id of their own.
        with self._identity_lock:
            while self.identity is None:
                remaining = deadline - time.monotonic()
                identity = self._servers.call_any(
                    lambda broker: broker.init_producer(), timeout=max(remaining, 0.0)
                )
                with self._lock:
                    self.identity = identity
                    self._sequences.clear()
            return self.identity

    def _forget_identity(self, stale: ProducerIdentity | None = None) -> None:
        """Drop the producer id (only if it is still ``stale``, when given): the next batch
        fetches a new one and numbers from 0."""
        with self._lock:
            if stale is None or self.identity == stale:
                self.identity = None
                self._sequences.clear()

    # -- sending ------------------------------------------------------------------------------

    def _encode(self, batch: ProducerBatch) -> bytes:
        if batch.encoded is None:
            producer_id, epoch, sequence = batch.sequence
            compression = self._config.compression
            if batch.keyed is None and batch.timestamps is None:
                batch.encoded = encode_values_batch(
                    batch.values,
                    compression=compression,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    base_sequence=sequence,
                    timestamp_ms=batch.timestamp,
                )
            else:
                keyed = batch.keyed_columns()
                batch.encoded = encode_batch(
                    list(zip(keyed.keys, batch.values, keyed.headers, strict=True)),
                    compression=compression,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    base_sequence=sequence,
                    timestamp_ms=batch.timestamp,
                    timestamps=batch.timestamps,
                )
        return batch.encoded

    def _send(self, request: ProduceRequest) -> None:
        """POST ``request``'s batches as one request; retry the same bytes until acknowledged."""
        cfg = self._config
        topic, partition, batches = request
        deadline = batches[0].created + cfg.delivery_timeout_ms / 1000
        attempts = 0
        renumbered = False
        try:
            body = b"".join([self._encode(batch) for batch in batches])
            while True:
                leader: BrokerClient | None = None
                try:
                    leader = self._servers.leader(topic, partition)
                    acks = leader.produce_batches(topic, partition, body, acks=cfg.acks)
                except UnknownProducerIdError:
                    # The broker forgot this producer id (unused past its expiration): nothing
                    # sent under it can be deduplicated any more, so, as Kafka's producer does,
                    # take a new id and renumber these batches from the partition's new sequence.
                    if not cfg.enable_idempotence or renumbered:
                        raise
                    renumbered = True
                    body = self._renumber(request)
                    continue
                except Exception as exc:
                    attempts += 1
                    delay = self._servers.retry_delay(topic, partition, exc, leader)
                    if delay is None or attempts > cfg.retries:
                        raise
                    if time.monotonic() + delay >= deadline:
                        raise DeliveryTimeoutError(
                            f"batch for {topic}-{partition} not acknowledged within "
                            f"delivery.timeout.ms ({cfg.delivery_timeout_ms}); last error: {exc}"
                        ) from exc
                    log.debug(
                        "retrying batch for %s-%s in %.2fs after %s: %s",
                        topic,
                        partition,
                        delay,
                        type(exc).__name__,
                        exc,
                    )
                    time.sleep(delay)
                    continue
                self._finish(request, acks, None)
                return
        except Exception as exc:  # delivered to the batches' futures and callbacks
            if cfg.enable_idempotence:
                # The broker may or may not hold these sequences now: start a fresh producer id
                # so later batches of this partition do not hit a sequence gap.
                self._forget_identity()
            self._finish(request, [], exc)

    def _renumber(self, request: ProduceRequest) -> bytes:
        """Give ``request`` a fresh producer identity and sequences; return its new encoding."""
        first = request.batches[0].sequence
        self._forget_identity(ProducerIdentity(first.producer_id, first.producer_epoch))
        identity = self._producer_identity(request.batches[0])
        self._number(request, identity, only_new=False)
        return b"".join([self._encode(batch) for batch in request.batches])

    # -- outcomes -----------------------------------------------------------------------------

    def _finish(
        self, request: ProduceRequest, acks: list[BatchAck], error: BaseException | None
    ) -> None:
        self._ready.request_done(request)
        for i, batch in enumerate(request.batches):
            self._complete(batch, acks[i] if i < len(acks) else None, error)

    def _complete(
        self, batch: ProducerBatch, ack: BatchAck | None, error: BaseException | None
    ) -> None:
        if error is None:
            if ack is not None:
                batch.offset = ack.base_offset
                if ack.log_append_time >= 0:
                    batch.log_append_time = ack.log_append_time
        elif not isinstance(error, HeadwaterError | TimeoutError | httpx.HTTPError):
            error = UnknownServerError(f"producer failed: {type(error).__name__}: {error}")
        batch.error = error
        batch.encoded = None
        self._ready.release(batch)
        batch.notify()
