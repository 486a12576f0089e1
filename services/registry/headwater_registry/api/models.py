"""Request and response bodies of the registry's REST API (Confluent's field names)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from headwater.errors import HeadwaterError, MalformedRequestError
from headwater.registry.errors import (
    MalformedJsonError,
    RegistryError,
    StoreTimeoutError,
    UnprocessableEntityError,
)
from headwater.registry.schema import SchemaReference
from headwater_kernel import openapi
from headwater_kernel.json_integer import JsonInteger
from headwater_registry.names import INT_MAX, INT_MIN
from headwater_registry.schemas import SchemaInput

JavaInt = Annotated[int, JsonInteger(INT_MIN, INT_MAX)]
"""Confluent's ids and versions are Java ``int``: a larger number, or one that is not a JSON
integer (``"1"``, ``true``), is a bad body (422)."""


class Reference(BaseModel):
    """A named type defined by another subject's version."""

    name: str
    subject: str
    version: JavaInt

    def to_reference(self) -> SchemaReference:
        return SchemaReference(self.name, self.subject, self.version)


class SchemaRequest(BaseModel):
    """A schema to register, look up or check (``id``/``version`` only in IMPORT mode)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    schema_text: str = Field(alias="schema")
    schemaType: str | None = None  # noqa: N815 -- Confluent's JSON field name
    references: list[Reference] = Field(default_factory=list)
    id: JavaInt | None = None
    version: JavaInt | None = None
    metadata: dict[str, Any] | None = None
    ruleSet: dict[str, Any] | None = None  # noqa: N815 -- Confluent's JSON field name

    def to_input(self) -> SchemaInput:
        refs = tuple(r.to_reference() for r in self.references)
        return SchemaInput(self.schema_text, self.schemaType, refs)


class ConfigRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    compatibility: str | None = None
    normalize: StrictBool | None = None  # a JSON boolean: 0 or "true" is a bad body (422)


class ModeRequest(BaseModel):
    mode: str


class RegisteredId(BaseModel):
    id: int


class SchemaById(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    schema_text: str = Field(alias="schema")
    schemaType: str | None = None  # noqa: N815 -- Confluent's JSON field name
    references: list[Reference] | None = None


class SubjectVersion(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    subject: str
    version: int
    id: int
    schema_text: str = Field(alias="schema")
    schemaType: str | None = None  # noqa: N815 -- Confluent's JSON field name
    references: list[Reference] | None = None


class SubjectVersionPair(BaseModel):
    subject: str
    version: int


class ConfigAnswer(BaseModel):
    compatibilityLevel: str  # noqa: N815 -- Confluent's JSON field name
    normalize: bool | None = None


class ConfigUpdated(BaseModel):
    compatibility: str
    normalize: bool | None = None


class ModeAnswer(BaseModel):
    mode: str


class CompatibilityAnswer(BaseModel):
    is_compatible: bool
    messages: list[str] | None = None


def errors(*raised: type[HeadwaterError]) -> dict[int | str, dict[str, Any]]:
    """A route's error answers for OpenAPI: by status, each naming its codes, with the body.

    The routers answer under the registry's media type (``default_response_class``), so FastAPI
    documents these bodies under it too.
    """
    return openapi.error_responses(*raised)


BAD_BODY = (MalformedRequestError, MalformedJsonError, UnprocessableEntityError)
"""What a route with a JSON body answers for one it cannot read (400) or that has the wrong
shape (422, also for a bad query parameter)."""
BAD_PARAMETER = (UnprocessableEntityError,)
"""A query parameter of the wrong type (a flag that is no boolean, a negative offset)."""
READ_FAILED = (RegistryError,)
"""The database failing under a read (50001)."""
WRITE_FAILED = (RegistryError, StoreTimeoutError)
"""The database failing under a write (50001), or conflicting writers outlasting the retries."""
