"""Typed errors with stable codes, shared by every service and client.

Every error that crosses HTTP is the JSON body ``{"error_code": int, "message": str}`` with an HTTP
status. Domain code raises a subclass of :class:`HeadwaterError`; each service installs one handler
(``headwater_kernel.errors.install_error_handlers``) that turns it into that body. Clients turn
the body back into the same class with :meth:`ErrorFamily.for_code`, so an error survives the trip
over the wire with its type.

The five-digit codes follow Confluent's convention (first three digits are the HTTP status). A code
means one thing within a *family* -- the service that speaks it -- so the registry's 40401
("subject not found", as Confluent's) and the broker's 40401 ("topic not found", as REST Proxy's)
can coexist::

    HeadwaterError
     +-- RequestError (common to every service: bad body, media type, too large, internal)
     +-- BrokerError          family "broker"       (this module)
     +-- CoordinatorError     family "coordinator"  (headwater.groups.errors)
     +-- RegistryError        family "registry"     (headwater.registry.errors)

Where Kafka has a numeric error code for the same condition, the class names it in ``kafka_code``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class HeadwaterError(Exception):
    """Base of every Headwater error; carries a stable five-digit code and an HTTP status."""

    error_code: ClassVar[int] = 50001
    http_status: ClassVar[int] = 500
    kafka_code: ClassVar[int | None] = None
    # Seconds the server asked the client to wait before retrying (a 503's ``Retry-After``),
    # set by clients when they rebuild the error from a response.
    retry_after: float | None = None

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message()
        super().__init__(self.message)

    @classmethod
    def default_message(cls) -> str:
        return cls.__doc__.strip().splitlines()[0] if cls.__doc__ else cls.__name__

    def to_body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "message": self.message}

    @classmethod
    def from_fields(cls, message: str, body: dict[str, Any]) -> HeadwaterError:
        """Rebuild from a body: subclasses whose body carries more fields read them here."""
        return cls(message)


class ErrorFamily:
    """The codes one service speaks, looked up in both directions.

    Register classes with the :meth:`register` decorator; :meth:`for_code` finds the class for a
    code received over the wire (common request errors are found from every family).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._by_code: dict[int, type[HeadwaterError]] = {}

    def register(self, cls: type[HeadwaterError]) -> type[HeadwaterError]:
        if cls.error_code in self._by_code:
            raise ValueError(f"{self.name}: error code {cls.error_code} registered twice")
        self._by_code[cls.error_code] = cls
        return cls

    def for_code(self, code: int) -> type[HeadwaterError]:
        if code in self._by_code:
            return self._by_code[code]
        if self is not COMMON and code in COMMON._by_code:
            return COMMON._by_code[code]
        return UnknownServerError

    def from_body(self, status: int, body: Any) -> HeadwaterError:
        """Rebuild the typed error from an HTTP error response (status and decoded JSON body)."""
        if isinstance(body, dict) and isinstance(body.get("error_code"), int):
            cls = self.for_code(body["error_code"])
            error = cls.from_fields(str(body.get("message", "")), body)
            if cls is UnknownServerError:
                error.message = f"HTTP {status}, error_code {body['error_code']}: {error.message}"
            return error
        return UnknownServerError(f"HTTP {status}: {str(body)[:500]}")


COMMON = ErrorFamily("common")


# --- Common request errors (every service) -------------------------------------------------------


class RequestError(HeadwaterError):
    """The request was malformed."""

    error_code = 40001
    http_status = 400


COMMON.register(RequestError)


@COMMON.register
class MalformedRequestError(RequestError):
    """The request body is not valid JSON or does not have the expected shape."""

    error_code = 40002
    http_status = 400


@COMMON.register
class NotAcceptableError(RequestError):
    """None of the media types in the Accept header can be produced."""

    # REST Proxy's and Schema Registry's code (their framework's: the HTTP status itself).
    error_code = 406
    http_status = 406


@COMMON.register
class RequestTooLargeError(RequestError):
    """The request body is larger than this service accepts."""

    error_code = 41301
    http_status = 413
    kafka_code = 10  # MESSAGE_TOO_LARGE


@COMMON.register
class UnsupportedMediaTypeError(RequestError):
    """The request's Content-Type is not one this endpoint accepts."""

    # REST Proxy's and Schema Registry's code (their framework's: the HTTP status itself).
    error_code = 415
    http_status = 415


@COMMON.register
class InvalidRequestError(RequestError):
    """A request field has an invalid value."""

    error_code = 42200
    http_status = 422


@COMMON.register
class UnknownServerError(HeadwaterError):
    """The server failed in an unexpected way."""

    error_code = 50000
    http_status = 500
    kafka_code = -1  # UNKNOWN_SERVER_ERROR


@COMMON.register
class ServiceUnavailableError(HeadwaterError):
    """The service is starting up or shutting down; retry."""

    error_code = 50301
    http_status = 503


# --- Broker --------------------------------------------------------------------------------------

BROKER = ErrorFamily("broker")


class BrokerError(HeadwaterError):
    """A broker request failed."""

    error_code = 50002
    http_status = 500


BROKER.register(BrokerError)


@BROKER.register
class TopicNotFoundError(BrokerError):
    """Topic not found."""

    error_code = 40401  # REST Proxy's code
    http_status = 404
    kafka_code = 3  # UNKNOWN_TOPIC_OR_PARTITION


@BROKER.register
class PartitionNotFoundError(BrokerError):
    """Partition not found."""

    error_code = 40402  # REST Proxy's code
    http_status = 404
    kafka_code = 3  # UNKNOWN_TOPIC_OR_PARTITION


@BROKER.register
class UnknownProducerIdError(BrokerError):
    """The producer id is unknown to this broker (never issued, or expired)."""

    error_code = 40405
    http_status = 404
    kafka_code = 59  # UNKNOWN_PRODUCER_ID


@BROKER.register
class TopicAlreadyExistsError(BrokerError):
    """Topic already exists."""

    error_code = 40901
    http_status = 409
    kafka_code = 36  # TOPIC_ALREADY_EXISTS


@BROKER.register
class OutOfOrderSequenceError(BrokerError):
    """The batch's sequence number does not follow the last one stored for this producer."""

    error_code = 40902
    http_status = 409
    kafka_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


@BROKER.register
class InvalidProducerEpochError(BrokerError):
    """The producer epoch is older than the current one: this producer has been fenced."""

    error_code = 40903
    http_status = 409
    kafka_code = 47  # INVALID_PRODUCER_EPOCH


@BROKER.register
class CorruptRecordError(BrokerError):
    """The record batch is corrupt (bad CRC, wrong magic, truncated or malformed)."""

    error_code = 40003
    http_status = 400
    kafka_code = 2  # CORRUPT_MESSAGE


@BROKER.register
class InvalidOffsetError(BrokerError):
    """The offset parameter is not a valid offset."""

    error_code = 40004
    http_status = 400


@BROKER.register
class RecordTooLargeError(BrokerError):
    """The batch is larger than the topic's max.message.bytes."""

    error_code = 41302
    http_status = 413
    kafka_code = 10  # MESSAGE_TOO_LARGE


@BROKER.register
class OffsetOutOfRangeError(BrokerError):
    """The requested offset is outside the partition's valid range."""

    error_code = 41601
    http_status = 416
    kafka_code = 1  # OFFSET_OUT_OF_RANGE


@BROKER.register
class InvalidTopicError(BrokerError):
    """The topic name is not valid."""

    error_code = 42201
    http_status = 422
    kafka_code = 17  # INVALID_TOPIC_EXCEPTION


@BROKER.register
class InvalidConfigError(BrokerError):
    """A topic configuration value is not valid."""

    error_code = 42202
    http_status = 422
    kafka_code = 40  # INVALID_CONFIG


@BROKER.register
class InvalidPartitionsError(BrokerError):
    """The partition count is not valid."""

    error_code = 42203
    http_status = 422
    kafka_code = 37  # INVALID_PARTITIONS


@BROKER.register
class InvalidReplicationFactorError(BrokerError):
    """The replication factor is not valid for this cluster."""

    error_code = 42204
    http_status = 422
    kafka_code = 38  # INVALID_REPLICATION_FACTOR


@BROKER.register
class InvalidRecordError(BrokerError):
    """A record in the request is not valid (bad key/value encoding, bad partition field)."""

    error_code = 42205
    http_status = 422
    kafka_code = 87  # INVALID_RECORD


@BROKER.register
class EmptyProduceError(BrokerError):
    """A REST produce body has no records (empty, null, ``{}`` or ``{"records": []}``)."""

    # REST Proxy's answer: its framework's constraint violation, the HTTP status as the code.
    error_code = 422
    http_status = 422
    kafka_code = 87  # INVALID_RECORD


@BROKER.register
class EmbeddedFormatError(BrokerError):
    """A stored record cannot be shown in the requested embedded format (not JSON, for json)."""

    # 406 as REST Proxy's 406 for a format that does not match the data: another Accept
    # (the binary format) answers the same request.
    error_code = 40602
    http_status = 406


@BROKER.register
class StorageError(BrokerError):
    """The broker could not read or write its log storage."""

    error_code = 50003
    http_status = 500
    kafka_code = 56  # KAFKA_STORAGE_ERROR


# --- Broker: the cluster (docs/cluster.md, "Error codes added by the cluster") -------------------


@BROKER.register
class NotLeaderOrFollowerError(BrokerError):
    """This broker does not lead the partition."""

    error_code = 42101
    http_status = 421
    kafka_code = 6  # NOT_LEADER_OR_FOLLOWER

    def __init__(
        self,
        message: str | None = None,
        *,
        leader_id: int = -1,
        leader_url: str | None = None,
        leader_epoch: int = -1,
    ) -> None:
        super().__init__(message)
        self.leader_id = leader_id
        self.leader_url = leader_url
        self.leader_epoch = leader_epoch

    def to_body(self) -> dict[str, Any]:
        # The body names the current leader so a client can go there without a metadata refresh.
        return {
            **super().to_body(),
            "leader_id": self.leader_id,
            "leader_url": self.leader_url,
            "leader_epoch": self.leader_epoch,
        }

    @classmethod
    def from_fields(cls, message: str, body: dict[str, Any]) -> NotLeaderOrFollowerError:
        url = body.get("leader_url")
        return cls(
            message,
            leader_id=_int(body.get("leader_id")),
            leader_url=url if isinstance(url, str) else None,
            leader_epoch=_int(body.get("leader_epoch")),
        )


@BROKER.register
class FencedLeaderEpochError(BrokerError):
    """The request carried a leader epoch older than the partition's current one."""

    error_code = 40904
    http_status = 409
    kafka_code = 74  # FENCED_LEADER_EPOCH


@BROKER.register
class UnknownLeaderEpochError(BrokerError):
    """The request carried a leader epoch newer than this broker knows."""

    error_code = 40905
    http_status = 409
    kafka_code = 75  # UNKNOWN_LEADER_EPOCH


@BROKER.register
class StaleControllerEpochError(BrokerError):
    """The controller epoch is not the current one: a newer controller has been elected."""

    error_code = 40906
    http_status = 409
    kafka_code = 11  # STALE_CONTROLLER_EPOCH


@BROKER.register
class StaleBrokerEpochError(BrokerError):
    """The broker epoch is not the current one: this broker incarnation has been replaced."""

    error_code = 40907
    http_status = 409
    kafka_code = 77  # STALE_BROKER_EPOCH


@BROKER.register
class IdempotencyKeyConflictError(BrokerError):
    """The Idempotency-Key of a produce was used before for a request with other records."""

    error_code = 40910
    http_status = 409


@BROKER.register
class BrokerIdInUseError(BrokerError):
    """The broker id is already registered by a live broker."""

    error_code = 40908
    http_status = 409


@BROKER.register
class StalePartitionEpochError(BrokerError):
    """The partition changed since the proposal was made (its partition epoch moved on)."""

    error_code = 40909
    http_status = 409
    kafka_code = 108  # INVALID_UPDATE_VERSION


@BROKER.register
class InvalidReplicaAssignmentError(BrokerError):
    """The replica assignment is not valid (unknown, repeated or too few brokers)."""

    error_code = 42206
    http_status = 422
    kafka_code = 39  # INVALID_REPLICA_ASSIGNMENT


@BROKER.register
class LeaderNotAvailableError(BrokerError):
    """The partition has no leader now; retry."""

    error_code = 50302
    http_status = 503
    kafka_code = 5  # LEADER_NOT_AVAILABLE


@BROKER.register
class OffsetNotAvailableError(BrokerError):
    """A new leader's high watermark has not yet reached the start of its leader epoch, so its
    end offset could be below one the previous leader already reported; retry (KIP-207)."""

    error_code = 50307
    http_status = 503
    kafka_code = 78  # OFFSET_NOT_AVAILABLE


@BROKER.register
class NotEnoughReplicasError(BrokerError):
    """Fewer in-sync replicas than min.insync.replicas; nothing was appended."""

    error_code = 50303
    http_status = 503
    kafka_code = 19  # NOT_ENOUGH_REPLICAS


@BROKER.register
class NotEnoughReplicasAfterAppendError(BrokerError):
    """Appended, but the in-sync set shrank below min.insync.replicas before it was replicated."""

    error_code = 50304
    http_status = 503
    kafka_code = 20  # NOT_ENOUGH_REPLICAS_AFTER_APPEND


@BROKER.register
class NotControllerError(BrokerError):
    """This broker is not the controller, or there is no controller now."""

    error_code = 50305
    http_status = 503
    kafka_code = 41  # NOT_CONTROLLER

    def __init__(
        self,
        message: str | None = None,
        *,
        controller_id: int = -1,
        controller_url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.controller_id = controller_id
        self.controller_url = controller_url

    def to_body(self) -> dict[str, Any]:
        return {
            **super().to_body(),
            "controller_id": self.controller_id,
            "controller_url": self.controller_url,
        }

    @classmethod
    def from_fields(cls, message: str, body: dict[str, Any]) -> NotControllerError:
        url = body.get("controller_url")
        return cls(
            message,
            controller_id=_int(body.get("controller_id")),
            controller_url=url if isinstance(url, str) else None,
        )


@BROKER.register
class MetadataUnavailableError(BrokerError):
    """The cluster metadata store is unreachable; retry."""

    error_code = 50306
    http_status = 503


@BROKER.register
class RelayOutcomeUnknownError(BrokerError):
    """A produce relayed to the partition's leader was sent, but its answer was lost: the leader
    may have appended the records. Retry with the same ``Idempotency-Key`` to be answered the
    first attempt's offsets rather than store them twice."""

    error_code = 50201
    http_status = 502


@BROKER.register
class RequestTimedOutError(BrokerError):
    """The request was not satisfied in time (acks=all waited for the in-sync replicas)."""

    error_code = 50401
    http_status = 504
    kafka_code = 7  # REQUEST_TIMED_OUT


def _int(value: Any) -> int:
    """A broker id or epoch from a body; -1 (none) for anything that is not an integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else -1
