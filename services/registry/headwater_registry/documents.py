"""The JSON documents the core answers with, in Confluent's field names, rendered as they are.

TypedDicts rather than models: the routes serialise them straight to bytes (orjson), which costs a
fraction of validating a response model on every read; ``api/models.py`` documents the same shapes
in OpenAPI.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class ReferenceDocument(TypedDict):
    name: str
    subject: str
    version: int


class SchemaDocument(TypedDict):
    """What every schema answer carries: its text, its type unless Avro, its references if any."""

    schema: str
    schemaType: NotRequired[str]
    references: NotRequired[list[ReferenceDocument]]


class VersionDocument(SchemaDocument):
    """A subject's version: which subject and version, the schema's global id, the schema."""

    subject: str
    version: int
    id: int


class SubjectVersion(TypedDict):
    subject: str
    version: int


class ConfigDocument(TypedDict):
    """``GET``/``DELETE /config[/{s}]``: the level in force (or removed)."""

    compatibilityLevel: str
    normalize: NotRequired[bool]


class ConfigUpdate(TypedDict):
    """``PUT /config[/{s}]``: the level now set."""

    compatibility: str
    normalize: NotRequired[bool]


class ModeDocument(TypedDict):
    mode: str


class CompatibilityResult(TypedDict):
    is_compatible: bool
    messages: NotRequired[list[str]]
