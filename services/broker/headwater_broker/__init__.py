"""The storage broker: durable partitioned logs of Kafka record batches, served over HTTP."""
