"""Request and response bodies of the registry's REST API (Confluent's field names)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from headwater.registry.schema import SchemaReference
from headwater_registry.schemas import SchemaInput


class Reference(BaseModel):
    """A named type defined by another subject's version."""

    name: str
    subject: str
    version: int

    def to_reference(self) -> SchemaReference:
        return SchemaReference(self.name, self.subject, self.version)


class SchemaRequest(BaseModel):
    """A schema to register, look up or check (``id``/``version`` only in IMPORT mode)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    schema_text: str = Field(alias="schema")
    schemaType: str | None = None  # noqa: N815 -- Confluent's JSON field name
    references: list[Reference] = Field(default_factory=list)
    id: int | None = None
    version: int | None = None
    metadata: dict[str, Any] | None = None
    ruleSet: dict[str, Any] | None = None  # noqa: N815 -- Confluent's JSON field name

    def to_input(self) -> SchemaInput:
        refs = tuple(r.to_reference() for r in self.references)
        return SchemaInput(self.schema_text, self.schemaType, refs)


class ConfigRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    compatibility: str | None = None
    normalize: bool | None = None


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


class ErrorBody(BaseModel):
    """Every error: Confluent's five-digit code (or 400/422 for bad requests) and a message."""

    error_code: int
    message: str


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (404, "40401 subject, 40402 version, 40403 schema not found; 40404-40409"),
        (409, "40901 incompatible schema"),
        (422, "422 bad body; 42201-42211"),
        (500, "50001 store error, 50002 timeout"),
    )
}
"""The error body on every registry route, so OpenAPI shows what clients get."""
