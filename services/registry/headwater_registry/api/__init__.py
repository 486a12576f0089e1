"""The registry's HTTP API: Confluent Schema Registry's routes, one router per resource."""

from starlette.convertors import register_url_convertor

from headwater_registry.api.rewrite import SubjectConvertor

# Starlette keeps path convertors in one process-wide table, read when a route's path is compiled,
# that is when a router module here is imported: ``{subject:subject}`` is known before any is.
register_url_convertor("subject", SubjectConvertor())
