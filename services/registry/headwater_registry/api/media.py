"""What the registry answers with: Confluent's media type, JSON rendered by orjson."""

from __future__ import annotations

from headwater_kernel.body import JSONBody

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryJSON(JSONBody):
    """A JSON answer under Confluent's media type."""

    media_type = MEDIA_TYPE
