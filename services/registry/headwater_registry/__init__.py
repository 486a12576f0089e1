"""The schema registry service: Confluent's Schema Registry REST API over a SQL store."""
