"""Headwater: a Kafka-style streaming platform in Python (client SDK and shared code)."""

from __future__ import annotations

__version__ = "0.1.0"
