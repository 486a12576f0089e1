"""Typed errors with stable codes, shared by every service and client.

Every error that crosses HTTP is the JSON body ``{"error_code": int, "message": str}`` with an HTTP
status. Domain code raises a subclass of :class:`HeadwaterError`; each service installs one handler
(``headwater_kernel.service.install_error_handlers``) that turns it into that body. Clients turn
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

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message()
        super().__init__(self.message)

    @classmethod
    def default_message(cls) -> str:
        return cls.__doc__.strip().splitlines()[0] if cls.__doc__ else cls.__name__

    def to_body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "message": self.message}


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
            error = cls(str(body.get("message", "")))
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

    error_code = 40601
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

    error_code = 41501
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
class StorageError(BrokerError):
    """The broker could not read or write its log storage."""

    error_code = 50003
    http_status = 500
    kafka_code = 56  # KAFKA_STORAGE_ERROR
