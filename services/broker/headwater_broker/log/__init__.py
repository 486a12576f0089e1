"""The log storage engine: segments, indexes, partitions and idempotent-producer state."""
