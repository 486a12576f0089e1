"""``JsonInteger``: an integer request field as JSON Schema defines one, for pydantic models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import core_schema


@dataclass(frozen=True)
class JsonInteger:
    """An integer request field as JSON Schema defines one, within ``[ge, le]``: ``1`` and ``1.0``
    are integers; ``true`` and ``"1"`` -- which pydantic's lax mode would also read as 1 -- are
    not. Built from pydantic-core's own validators, as a check in Python per field would cost as
    much as the rest of a commit. Use as ``Annotated[int, JsonInteger(ge, le)]``."""

    ge: int | None = None
    le: int | None = None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        whole_float = core_schema.chain_schema(
            [
                core_schema.float_schema(strict=True),
                core_schema.no_info_plain_validator_function(_whole),
            ]
        )
        integer = core_schema.union_schema(
            [core_schema.int_schema(strict=True), whole_float],
            custom_error_type="int_type",  # pydantic's own "Input should be a valid integer"
        )
        bounds = core_schema.int_schema(strict=True, ge=self.ge, le=self.le)
        return core_schema.chain_schema([integer, bounds])

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer"}
        if self.ge is not None:
            out["minimum"] = self.ge
        if self.le is not None:
            out["maximum"] = self.le
        return out


def _whole(value: float) -> int:
    if not value.is_integer():
        raise ValueError("Input should be an integer")
    return int(value)
