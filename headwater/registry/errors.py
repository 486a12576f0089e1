"""The registry's error family: Confluent Schema Registry's error codes and HTTP statuses.

Codes are Confluent's, so existing clients that branch on ``error_code`` behave unchanged::

    RegistryError (50001, store error)
     +-- SubjectNotFoundError 40401, VersionNotFoundError 40402, SchemaNotFoundError 40403
     +-- SubjectSoftDeletedError 40404, SubjectNotSoftDeletedError 40405,
     |   VersionSoftDeletedError 40406, VersionNotSoftDeletedError 40407
     +-- SubjectConfigNotFoundError 40408, SubjectModeNotFoundError 40409
     +-- IncompatibleSchemaError 409 / 40901
     +-- InvalidSchemaError 42201, InvalidVersionError 42202, InvalidCompatibilityLevelError 42203,
     |   InvalidModeError 42204, OperationNotPermittedError 42205, ReferenceExistsError 42206,
     |   IdMismatchError 42207, InvalidSubjectError 42208, SchemaTooLargeError 42209,
     |   ContextNotEmptyError 42211
     +-- MalformedJsonError 400, UnprocessableEntityError 422 (rest-utils' codes for bad bodies)
     +-- StoreTimeoutError 50002, ForwardingError 50003

Incompatible schemas answer HTTP 409 with ``error_code`` 40901, as Confluent 8.0.4 and later do
(earlier releases and Karapace send 409 in both places). Clients, confluent-kafka's among them,
branch on the HTTP status 409, which both variants share; the five-digit code keeps this family
consistent with every other code it speaks and with the current Confluent release.
"""

from __future__ import annotations

from headwater.errors import ErrorFamily, HeadwaterError

REGISTRY = ErrorFamily("registry")


class RegistryError(HeadwaterError):
    """Error in the backend data store."""

    error_code = 50001
    http_status = 500


REGISTRY.register(RegistryError)


@REGISTRY.register
class StoreTimeoutError(RegistryError):
    """Operation timed out waiting for the backend data store."""

    error_code = 50002
    http_status = 500


@REGISTRY.register
class ForwardingError(RegistryError):
    """Error while forwarding the request to the primary."""

    error_code = 50003
    http_status = 500


@REGISTRY.register
class MalformedJsonError(RegistryError):
    """The request body is not valid JSON."""

    error_code = 400
    http_status = 400


@REGISTRY.register
class UnprocessableEntityError(RegistryError):
    """The request body or a parameter does not have the expected shape."""

    error_code = 422
    http_status = 422


@REGISTRY.register
class SubjectNotFoundError(RegistryError):
    """Subject not found."""

    error_code = 40401
    http_status = 404


@REGISTRY.register
class VersionNotFoundError(RegistryError):
    """Version not found."""

    error_code = 40402
    http_status = 404


@REGISTRY.register
class SchemaNotFoundError(RegistryError):
    """Schema not found."""

    error_code = 40403
    http_status = 404


@REGISTRY.register
class SubjectSoftDeletedError(RegistryError):
    """Subject was soft deleted; set permanent=true to delete it permanently."""

    error_code = 40404
    http_status = 404


@REGISTRY.register
class SubjectNotSoftDeletedError(RegistryError):
    """Subject was not soft deleted first; it must be soft deleted before a permanent delete."""

    error_code = 40405
    http_status = 404


@REGISTRY.register
class VersionSoftDeletedError(RegistryError):
    """Version was soft deleted; set permanent=true to delete it permanently."""

    error_code = 40406
    http_status = 404


@REGISTRY.register
class VersionNotSoftDeletedError(RegistryError):
    """Version was not soft deleted first; it must be soft deleted before a permanent delete."""

    error_code = 40407
    http_status = 404


@REGISTRY.register
class SubjectConfigNotFoundError(RegistryError):
    """Subject does not have subject-level compatibility configured."""

    error_code = 40408
    http_status = 404


@REGISTRY.register
class SubjectModeNotFoundError(RegistryError):
    """Subject does not have subject-level mode configured."""

    error_code = 40409
    http_status = 404


@REGISTRY.register
class IncompatibleSchemaError(RegistryError):
    """Schema being registered is incompatible with an earlier schema."""

    error_code = 40901
    http_status = 409


@REGISTRY.register
class InvalidSchemaError(RegistryError):
    """Invalid schema."""

    error_code = 42201
    http_status = 422


@REGISTRY.register
class InvalidVersionError(RegistryError):
    """The specified version is not a valid version id (a positive integer, 'latest' or -1)."""

    error_code = 42202
    http_status = 422


@REGISTRY.register
class InvalidCompatibilityLevelError(RegistryError):
    """Invalid compatibility level."""

    error_code = 42203
    http_status = 422


@REGISTRY.register
class InvalidModeError(RegistryError):
    """Invalid mode."""

    error_code = 42204
    http_status = 422


@REGISTRY.register
class OperationNotPermittedError(RegistryError):
    """Operation not permitted in the current mode."""

    error_code = 42205
    http_status = 422


@REGISTRY.register
class ReferenceExistsError(RegistryError):
    """The schema is referenced by other schemas and cannot be deleted."""

    error_code = 42206
    http_status = 422


@REGISTRY.register
class IdMismatchError(RegistryError):
    """The schema id is already used by a different schema."""

    error_code = 42207
    http_status = 422


@REGISTRY.register
class InvalidSubjectError(RegistryError):
    """The subject name is not valid."""

    error_code = 42208
    http_status = 422


@REGISTRY.register
class SchemaTooLargeError(RegistryError):
    """The schema is too large."""

    error_code = 42209
    http_status = 422


@REGISTRY.register
class ContextNotEmptyError(RegistryError):
    """The context is not empty."""

    error_code = 42211
    http_status = 422
