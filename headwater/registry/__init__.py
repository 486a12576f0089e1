"""The schema registry's shared core: schemas, compatibility, errors, client SDK and Avro serde."""
