"""``make demo``: the validation job end to end on a throwaway platform, narrated on stdout.

Starts a registry and a broker as processes on free loopback ports (state in a temporary
directory), registers an ``Order`` schema, produces valid orders and broken payloads (wrong magic
byte, unknown schema id, truncated payload, an enum value the schema does not allow, a writer
schema whose fields the expected schema cannot read), runs the Spark job, prints its summary, a
few dead-letter records with their reasons and a few decoded valid rows, and stops what it started.
"""

from __future__ import annotations

import base64
import io
import json
import signal
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

import fastavro
import httpx

from headwater.producer import Producer
from headwater_kernel.local_service import ServiceProcess, free_port

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "demo",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {
            "name": "status",
            "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]},
        },
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}
LEGACY = {
    "type": "record",
    "name": "Order",
    "namespace": "demo",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "string"}],
}
ROOT = Path(__file__).resolve().parent.parent


def frame(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return b"\x00" + struct.pack(">I", schema_id) + buf.getvalue()


def register(registry: str, subject: str, schema: dict[str, Any]) -> int:
    response = httpx.post(
        f"{registry}/subjects/{subject}/versions",
        json={"schema": json.dumps(schema)},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    response.raise_for_status()
    schema_id: int = response.json()["id"]
    return schema_id


def payloads(order_id: int, legacy_id: int) -> list[tuple[str, bytes]]:
    """``(what, value)`` pairs: 40 valid orders and 10 broken payloads of five kinds."""
    statuses = ["NEW", "PAID", "SHIPPED"]
    good = [
        frame(
            order_id,
            ORDER,
            {
                "id": i,
                "customer": f"customer-{i % 7}",
                "amount": round(10 + i * 3.7, 2),
                "status": statuses[i % 3],
                "coupon": "SPRING" if i % 5 == 0 else None,
            },
        )
        for i in range(40)
    ]
    broken: list[tuple[str, bytes]] = [
        ("wrong magic byte", b"\x07" + good[0][1:]),
        ("wrong magic byte", b'{"id": 1, "amount": 9.99}'),
        ("unknown schema id", b"\x00" + struct.pack(">I", 424242) + good[1][5:]),
        ("unknown schema id", b"\x00" + struct.pack(">I", 424243) + good[2][5:]),
        ("truncated payload", good[3][:-5]),
        ("truncated payload", good[4][:8]),
    ]
    for i in (5, 6):
        # With no coupon the record ends with the status enum index and the coupon's union
        # branch (0 = null), one byte each: point the status past the schema's 3 symbols.
        record = {"id": i, "customer": "c", "amount": 1.0, "status": "NEW", "coupon": None}
        bad = bytearray(frame(order_id, ORDER, record))
        bad[-2] = 2 * 9  # zig-zag 9: symbol #9
        broken.append(("enum value the schema does not allow", bytes(bad)))
    broken += [
        (
            "fields the expected schema cannot read",
            frame(legacy_id, LEGACY, {"id": "A-1", "amount": "12 EUR"}),
        ),
        (
            "fields the expected schema cannot read",
            frame(legacy_id, LEGACY, {"id": "A-2", "amount": "free"}),
        ),
    ]
    mixed = [("valid", value) for value in good]
    # Spread the broken ones through the stream, as they would arrive in real life.
    for n, item in enumerate(broken):
        mixed.insert(4 * n + 3, item)
    return mixed


def main() -> int:
    from headwater_spark.job import JobConfig, ValidationJob
    from headwater_spark.session import build_session

    work = Path(tempfile.mkdtemp(prefix="headwater-demo-"))
    # A SIGTERM (timeout, CI) unwinds through ``finally`` so the services started here stop too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    registry_port, broker_port = free_port(), free_port()
    registry_url = f"http://127.0.0.1:{registry_port}"
    broker_url = f"http://127.0.0.1:{broker_port}"
    processes: list[ServiceProcess] = []
    try:
        print(f"== starting the platform (state in {work})")
        processes.append(
            ServiceProcess(
                "headwater_registry",
                registry_port,
                {
                    "REGISTRY_PORT": str(registry_port),
                    "REGISTRY_DATABASE_URL": f"sqlite:///{work / 'registry.db'}",
                },
                work / "registry.log",
            ).start()
        )
        processes.append(
            ServiceProcess(
                "headwater_broker",
                broker_port,
                {"BROKER_PORT": str(broker_port), "BROKER_DATA_DIR": str(work / "broker-0")},
                work / "broker.log",
            ).start()
        )
        print(f"   registry {registry_url}\n   broker   {broker_url}")

        topic, dlq = "orders", "orders-dlq"
        for name, partitions in ((topic, 2), (dlq, 1)):
            httpx.post(
                f"{broker_url}/topics", json={"name": name, "partitions": partitions}
            ).raise_for_status()
        order_id = register(registry_url, f"{topic}-value", ORDER)
        legacy_id = register(registry_url, "legacy-orders-value", LEGACY)
        print(
            f"== registered {topic}-value (id {order_id}) and legacy-orders-value (id {legacy_id})"
        )

        mixed = payloads(order_id, legacy_id)
        with Producer({"bootstrap.servers": broker_url}) as producer:
            for i, (_what, value) in enumerate(mixed):
                producer.produce(topic, value=value, key=f"order-{i}".encode())
            producer.flush(30)
        kinds: dict[str, int] = {}
        for what, _ in mixed:
            kinds[what] = kinds.get(what, 0) + 1
        print(f"== produced {len(mixed)} records to {topic}:")
        for what, count in kinds.items():
            print(f"   {count:>3}  {what}")

        print("== running the Spark validation job (local[*]) ...")
        spark = build_session("local[*]", app_name="headwater-demo", shuffle_partitions=2)
        config = JobConfig(
            brokers=[broker_url],
            registry=registry_url,
            topic=topic,
            output_path=str(work / "valid"),
            dead_letter_topic=dlq,
            summary_path=str(work / "summary.json"),
            state_dir=str(work / "state"),
        )
        summary = ValidationJob(spark, config).run_batch()
        print()
        print(summary.table())

        print(f"\n== a few dead letters from {dlq}:")
        records = httpx.get(
            f"{broker_url}/topics/{dlq}/partitions/0/records",
            params={"offset": 0},
            headers={"Accept": "application/vnd.kafka.binary.v2+json"},
        ).json()
        seen: set[str] = set()
        for record in records:
            headers = {h["key"]: base64.b64decode(h["value"]).decode() for h in record["headers"]}
            reason = headers["headwater.dlq.reason"]
            if reason in seen:
                continue
            seen.add(reason)
            source = (
                f"{headers['headwater.source.topic']}/{headers['headwater.source.partition']}"
                f"@{headers['headwater.source.offset']}"
            )
            print(f"   {source:<14} {reason:<20} {headers['headwater.dlq.message']}")

        print("\n== a few valid orders, decoded, from the Parquet output:")
        rows = spark.read.parquet(str(work / "valid")).orderBy("id").limit(4).collect()
        for row in rows:
            print(
                f"   id={row.id:<3} customer={row.customer:<11} amount={row.amount:<7} "
                f"status={row.status:<7} coupon={row.coupon} date={row.date}"
            )
        print(f"\nsummary JSON: {work / 'summary.json'}")
        spark.stop()
        return 0
    finally:
        print("== stopping the platform")
        for process in processes:
            process.stop()


if __name__ == "__main__":
    sys.exit(main())
