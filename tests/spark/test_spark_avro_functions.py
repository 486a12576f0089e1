"""from_confluent_avro / to_confluent_avro on real Spark with a real registry."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from headwater_spark.avro_functions import from_confluent_avro, to_confluent_avro
from tests.spark.conftest import Platform, avro_frame
from tests.support import unique

pytestmark = pytest.mark.spark

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "shop",
    "fields": [{"name": "city", "type": "string"}],
}
CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "home", "type": "shop.Address"},
        {"name": "tier", "type": ["null", "string"], "default": None},
    ],
}
CUSTOMER_V1 = {
    "type": "record",
    "name": "Customer",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "home", "type": "shop.Address"}],
}
REFUND = {
    "type": "record",
    "name": "Refund",
    "namespace": "shop",
    "fields": [{"name": "amount", "type": "double"}],
}


def test_decode_with_references_strategies_and_modes(
    spark: SparkSession, platform: Platform
) -> None:
    topic = unique("avro-fn")
    address_subject = f"{topic}-shop.Address"
    platform.register(address_subject, ADDRESS)
    refs = [{"name": "shop.Address", "subject": address_subject, "version": 1}]
    # TopicRecordName: several record types in one topic, each under <topic>-<record name>.
    v1 = platform.register(f"{topic}-shop.Customer", CUSTOMER_V1, refs)
    v2 = platform.register(f"{topic}-shop.Customer", CUSTOMER, refs)
    refund = platform.register(f"{topic}-shop.Refund", REFUND)
    named = {"shop.Address": ADDRESS}
    values = [
        avro_frame(v1, CUSTOMER_V1, {"id": 1, "home": {"city": "Oslo"}}, dict(named)),
        avro_frame(v2, CUSTOMER, {"id": 2, "home": {"city": "Rome"}, "tier": "gold"}, dict(named)),
        avro_frame(refund, REFUND, {"amount": 9.5}),
        b"\x01garbage",
        None,
    ]
    df = spark.createDataFrame([(v,) for v in values], "value binary")
    decoded = df.select(
        from_confluent_avro(
            "value",
            platform.registry,
            topic=topic,
            naming_strategy="TopicRecordName",
            record_name="shop.Customer",
            mode="PERMISSIVE",
        ).alias("c")
    ).collect()
    # v1 data resolves into the latest (v2) reader: the new field takes its default.
    assert [None if r.c is None else r.c.asDict(recursive=True) for r in decoded] == [
        {"id": 1, "home": {"city": "Oslo"}, "tier": None},
        {"id": 2, "home": {"city": "Rome"}, "tier": "gold"},
        None,  # a Refund is not a Customer
        None,  # not Confluent framing
        None,  # a null stays null
    ]
    refunds = df.select(
        from_confluent_avro("value", platform.registry, schema_id=refund, mode="PERMISSIVE")
    ).collect()
    assert refunds[2][0].amount == 9.5
    # FAILFAST (the default) fails the task, naming why the payload is not readable.
    garbage = spark.createDataFrame([(values[3],)], "value binary")
    with pytest.raises(Exception, match="BAD_FRAMING: magic byte is 0x01"):
        garbage.select(from_confluent_avro("value", platform.registry, schema_id=refund)).collect()
    customers = spark.createDataFrame([(values[0],)], "value binary")
    with pytest.raises(Exception, match="INCOMPATIBLE_SCHEMA: writer schema id"):
        customers.select(
            from_confluent_avro("value", platform.registry, schema_id=refund)
        ).collect()


def test_encode_then_decode_round_trips(spark: SparkSession, platform: Platform) -> None:
    topic = unique("avro-rt")
    schema_id = platform.register(f"{topic}-value", REFUND)
    df = spark.createDataFrame([(1.5,), (2.25,)], "amount double")
    from pyspark.sql import functions as sf

    framed = df.select(
        to_confluent_avro(sf.struct("amount"), platform.registry, topic=topic).alias("value")
    )
    raw = [r.value for r in framed.collect()]
    assert raw == [avro_frame(schema_id, REFUND, {"amount": a}) for a in (1.5, 2.25)]
    back = framed.select(from_confluent_avro("value", platform.registry, topic=topic).alias("r"))
    assert [r.r.amount for r in back.collect()] == [1.5, 2.25]
    keyed = platform.register(f"{topic}-key", "string")
    keys = spark.createDataFrame([("a",)], "k string").select(
        to_confluent_avro("k", platform.registry, topic=topic, is_key=True).alias("key")
    )
    assert keys.collect()[0].key == avro_frame(keyed, "string", "a")
