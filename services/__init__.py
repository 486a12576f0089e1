"""Headwater services: broker, registry and coordinator, each its own process."""
