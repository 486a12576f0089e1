"""The coordinator's error family: group, member, epoch and offset errors with stable codes.

::

    CoordinatorError
     +-- GroupNotFoundError            40401  (Kafka GROUP_ID_NOT_FOUND 69)
     +-- UnknownMemberError            40402  (Kafka UNKNOWN_MEMBER_ID 25)
     +-- UnknownTopicOrPartitionError  40403  (Kafka UNKNOWN_TOPIC_OR_PARTITION 3)
     +-- FencedMemberEpochError        40901  (Kafka FENCED_MEMBER_EPOCH 110)
     +-- StaleMemberEpochError         40902  (Kafka STALE_MEMBER_EPOCH 113)
     +-- FencedInstanceIdError         40903  (Kafka FENCED_INSTANCE_ID 82)
     +-- GroupNotEmptyError            40904  (Kafka NON_EMPTY_GROUP 68)
     +-- PartitionNotOwnedError        40905  a commit for a partition the member does not own
     +-- InvalidCommitOffsetError      42201  negative offset, or beyond the partition's log end
     +-- InvalidTimeoutError           42202  (Kafka INVALID_SESSION_TIMEOUT 26)
     +-- UnsupportedAssignorError      42203  (Kafka UNSUPPORTED_ASSIGNOR 112)
     +-- InvalidGroupIdError           42204  (Kafka INVALID_GROUP_ID 24)
     +-- InvalidResetError             42205  a reset request that names no valid target
     +-- InvalidTopicNameError         42206  (Kafka INVALID_TOPIC_EXCEPTION 17)
     +-- BrokersUnavailableError       50302  no broker answered a metadata or offsets request
     +-- StoreUnavailableError         50311  the coordinator's Redis does not answer

The fencing codes tell a client what to do: 40402 / 40901 / 40903 -- drop every partition and
rejoin with epoch 0; 40902 -- refresh the epoch from the next heartbeat and retry. The 503s
(:data:`RETRIABLE`) are transient and come with ``Retry-After``: send the request again then.
"""

from __future__ import annotations

from headwater.errors import ErrorFamily, HeadwaterError

COORDINATOR = ErrorFamily("coordinator")


class CoordinatorError(HeadwaterError):
    """A coordinator request failed."""

    error_code = 50004
    http_status = 500


COORDINATOR.register(CoordinatorError)


@COORDINATOR.register
class GroupNotFoundError(CoordinatorError):
    """Group not found."""

    error_code = 40401
    http_status = 404
    kafka_code = 69  # GROUP_ID_NOT_FOUND


@COORDINATOR.register
class UnknownMemberError(CoordinatorError):
    """The member is not (or no longer) part of the group; rejoin with epoch 0."""

    error_code = 40402
    http_status = 404
    kafka_code = 25  # UNKNOWN_MEMBER_ID


@COORDINATOR.register
class UnknownTopicOrPartitionError(CoordinatorError):
    """The topic or partition does not exist on the brokers."""

    error_code = 40403
    http_status = 404
    kafka_code = 3  # UNKNOWN_TOPIC_OR_PARTITION


@COORDINATOR.register
class FencedMemberEpochError(CoordinatorError):
    """The member epoch does not match the group's view; drop all partitions and rejoin."""

    error_code = 40901
    http_status = 409
    kafka_code = 110  # FENCED_MEMBER_EPOCH


@COORDINATOR.register
class StaleMemberEpochError(CoordinatorError):
    """The member epoch is older than the current one; heartbeat and retry with the new epoch."""

    error_code = 40902
    http_status = 409
    kafka_code = 113  # STALE_MEMBER_EPOCH


@COORDINATOR.register
class FencedInstanceIdError(CoordinatorError):
    """Another member has joined with the same static instance id; this one is fenced."""

    error_code = 40903
    http_status = 409
    kafka_code = 82  # FENCED_INSTANCE_ID


@COORDINATOR.register
class GroupNotEmptyError(CoordinatorError):
    """The group has active members; this operation needs an empty group."""

    error_code = 40904
    http_status = 409
    kafka_code = 68  # NON_EMPTY_GROUP


@COORDINATOR.register
class PartitionNotOwnedError(CoordinatorError):
    """The member does not own a partition it tried to commit."""

    error_code = 40905
    http_status = 409


@COORDINATOR.register
class InvalidCommitOffsetError(CoordinatorError):
    """The offset is negative or beyond the partition's log end."""

    error_code = 42201
    http_status = 422
    kafka_code = 1  # OFFSET_OUT_OF_RANGE


@COORDINATOR.register
class InvalidTimeoutError(CoordinatorError):
    """A session or rebalance timeout is outside the accepted range."""

    error_code = 42202
    http_status = 422
    kafka_code = 26  # INVALID_SESSION_TIMEOUT


@COORDINATOR.register
class UnsupportedAssignorError(CoordinatorError):
    """The requested assignor is not one the coordinator offers."""

    error_code = 42203
    http_status = 422
    kafka_code = 112  # UNSUPPORTED_ASSIGNOR


@COORDINATOR.register
class InvalidGroupIdError(CoordinatorError):
    """The group id is not valid."""

    error_code = 42204
    http_status = 422
    kafka_code = 24  # INVALID_GROUP_ID


@COORDINATOR.register
class InvalidResetError(CoordinatorError):
    """The offset reset request does not name a valid target."""

    error_code = 42205
    http_status = 422


@COORDINATOR.register
class InvalidTopicNameError(CoordinatorError):
    """The topic name is not valid: 1-249 characters of [A-Za-z0-9._-], not "." or ".."."""

    error_code = 42206
    http_status = 422
    kafka_code = 17  # INVALID_TOPIC_EXCEPTION


@COORDINATOR.register
class BrokersUnavailableError(CoordinatorError):
    """No broker answered the coordinator's metadata or offsets request."""

    error_code = 50302
    http_status = 503


@COORDINATOR.register
class StoreUnavailableError(CoordinatorError):
    """The coordinator's store (Redis) does not answer; retry."""

    error_code = 50311
    http_status = 503


RETRIABLE: tuple[type[CoordinatorError], ...] = (BrokersUnavailableError, StoreUnavailableError)
"""Transient errors: a dependency of the coordinator does not answer; retry after a pause."""
