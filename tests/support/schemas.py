"""The ``shop.Order`` Avro schema the validation tests share, and its compatible next version."""

from __future__ import annotations

from typing import Any

ORDER: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}

ORDER_V2: dict[str, Any] = {
    **ORDER,
    "fields": [*ORDER["fields"], {"name": "channel", "type": "string", "default": "web"}],
}
"""Adds a field with a default: data written with ORDER reads as ORDER_V2 (BACKWARD)."""
