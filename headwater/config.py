"""Client configuration with Kafka's key names, parsed and validated into typed settings.

Producers, consumers and the admin client take a plain ``dict`` as Kafka's clients do
(``{"bootstrap.servers": "http://127.0.0.1:8082", "acks": "all"}``). Every key is checked: an
unknown key or a bad value raises ``ValueError`` naming the key, so a typo never silently falls
back to a default. Values may be given as strings (as in a properties file) or as Python values.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from headwater.client.tls import client_ssl_context
from headwater.records.compression import Compression

DEFAULT_BOOTSTRAP = "http://127.0.0.1:8082"


def _bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError(f"{key}: expected true or false, got {raw!r}")


def _int(minimum: int, maximum: int = 2**63 - 1) -> Callable[[str, object], int]:
    def parse(key: str, raw: object) -> int:
        if isinstance(raw, bool):
            raise ValueError(f"{key}: expected an integer, got {raw!r}")
        try:
            value = int(raw) if isinstance(raw, int | str) else int(str(raw), 10)
        except ValueError:
            raise ValueError(f"{key}: expected an integer, got {raw!r}") from None
        if not minimum <= value <= maximum:
            raise ValueError(f"{key}: {value} is outside [{minimum}, {maximum}]")
        return value

    return parse


def _str(key: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"{key}: expected a string, got {raw!r}")
    return raw


def _optional_str(key: str, raw: object) -> str | None:
    if raw is None:
        return None
    return _str(key, raw) or None


def broker_urls(items: Iterable[object], default_scheme: str = "http") -> tuple[str, ...]:
    """Broker URLs as users write them (``host:port`` is ``http://host:port``), blanks skipped and
    trailing slashes cut; ValueError for an item that is no http(s) URL, or for none at all.

    ``bootstrap.servers`` here, and the Spark format's ``kafka.bootstrap.servers``, read by it.
    """
    urls = []
    for item in items:
        url = str(item).strip().rstrip("/")
        if not url:
            continue
        if "://" not in url:
            url = f"{default_scheme}://{url}"  # Kafka users write host:port
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{item!r} is not an http(s) URL or host:port")
        urls.append(url)
    if not urls:
        raise ValueError("at least one broker URL is required")
    return tuple(urls)


def _servers(key: str, raw: object) -> tuple[str, ...]:
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple):
        raise ValueError(f"{key}: expected comma-separated broker URLs, got {raw!r}")
    try:
        return broker_urls(items)
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def _acks(key: str, raw: object) -> int:
    text = str(raw).strip().lower()
    if text in ("all", "-1"):
        return -1
    if text in ("0", "1"):
        return int(text)
    raise ValueError(f"{key}: expected 0, 1, all or -1, got {raw!r}")


def _compression(key: str, raw: object) -> Compression:
    if isinstance(raw, Compression):
        return raw
    try:
        return Compression.from_name(str(raw))
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def _offset_reset(key: str, raw: object) -> str:
    text = str(raw).strip().lower()
    if text not in ("earliest", "latest", "none"):
        raise ValueError(f"{key}: expected earliest, latest or none, got {raw!r}")
    return text


# key -> (parser, default). One table for every client: a config dict may be shared between a
# producer and a consumer (as with Kafka's clients), so keys of the other role are accepted.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def _security_protocol(key: str, raw: object) -> str:
    text = str(raw).strip().upper()
    if text not in SECURITY_PROTOCOLS:
        raise ValueError(f"{key}: expected one of {', '.join(SECURITY_PROTOCOLS)}, got {raw!r}")
    if text.startswith("SASL"):
        raise ValueError(
            f"{key}: {text} needs SASL authentication, which this version does not have yet; "
            "use SSL (TLS, and mutual TLS with ssl.certificate.location) or PLAINTEXT"
        )
    return text


_KEYS: dict[str, tuple[Callable[[str, object], Any], object]] = {
    "bootstrap.servers": (_servers, DEFAULT_BOOTSTRAP),
    "client.id": (_str, "headwater-python"),
    "request.timeout.ms": (_int(1), 30_000),
    "retries": (_int(0, 2**31 - 1), 2**31 - 1),
    "retry.backoff.ms": (_int(0), 100),
    # producer
    "acks": (_acks, "all"),
    "linger.ms": (_int(0), 5),
    "batch.size": (_int(1), 1_000_000),
    "compression.type": (_compression, "none"),
    "delivery.timeout.ms": (_int(1), 120_000),
    "enable.idempotence": (_bool, True),
    "max.in.flight.requests.per.connection": (_int(1), 5),
    "buffer.memory": (_int(1), 64 * 1_048_576),
    "max.block.ms": (_int(0), 60_000),
    "metadata.max.age.ms": (_int(0), 300_000),
    # consumer
    "group.id": (_optional_str, None),
    "auto.offset.reset": (_offset_reset, "latest"),
    "enable.auto.commit": (_bool, True),
    "auto.commit.interval.ms": (_int(0), 5_000),
    "fetch.max.bytes": (_int(1), 52_428_800),
    "max.partition.fetch.bytes": (_int(1), 1_048_576),
    "fetch.max.wait.ms": (_int(0), 500),
    "max.poll.records": (_int(1), 500),
    "session.timeout.ms": (_int(1), 45_000),
    "heartbeat.interval.ms": (_int(1), 3_000),
    "coordinator.url": (_optional_str, None),
    "security.protocol": (_security_protocol, "PLAINTEXT"),
    "ssl.ca.location": (_optional_str, None),
    "ssl.certificate.location": (_optional_str, None),
    "ssl.key.location": (_optional_str, None),
}


def parse_config(config: Mapping[str, object]) -> dict[str, Any]:
    """Every known key with its parsed value (defaults filled in); ValueError names a bad key."""
    unknown = sorted(set(config) - set(_KEYS))
    if unknown:
        raise ValueError(f"unknown configuration key(s): {', '.join(map(repr, unknown))}")
    parsed = {
        key: parser(key, config.get(key, default)) for key, (parser, default) in _KEYS.items()
    }
    _check_transport(config, parsed)
    return parsed


def _check_transport(config: Mapping[str, object], parsed: dict[str, Any]) -> None:
    """Make the URLs agree with ``security.protocol``: with SSL a bare ``host:port`` is https and
    an http:// URL is refused (a TLS client must not fall back to plain text). Under PLAINTEXT an
    explicit https:// URL still means TLS: the URL names its scheme, as an HTTP client's does.
    ``ssl.*`` files must exist."""
    tls = parsed["security.protocol"] in TLS_PROTOCOLS
    key = "bootstrap.servers"
    raw = config.get(key, DEFAULT_BOOTSTRAP)
    items = raw.split(",") if isinstance(raw, str) else raw
    if tls and key not in config:
        parsed[key] = (DEFAULT_BOOTSTRAP.replace("http://", "https://"),)
    elif tls and isinstance(items, list | tuple):
        parsed[key] = broker_urls(items, default_scheme="https")  # host:port is https here
    coordinator = parsed["coordinator.url"]
    named = [(key, url) for url in parsed[key]]
    named += [("coordinator.url", u.strip()) for u in (coordinator or "").split(",") if u.strip()]
    for where, url in named:
        if tls and url.startswith("http://"):
            raise ValueError(
                f"{where}: {url} is plain HTTP but security.protocol is "
                f"{parsed['security.protocol']}: use https://"
            )
    for file_key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        path = parsed[file_key]
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{file_key}: no such file: {path}")
    if (parsed["ssl.certificate.location"] is None) != (parsed["ssl.key.location"] is None):
        raise ValueError("ssl.certificate.location and ssl.key.location go together")


# A setting's attribute is its key with dots as underscores (``retry.backoff.ms``:
# ``retry_backoff_ms``), but for these.
_ATTRIBUTE_KEYS = {
    "compression": "compression.type",
    "max_in_flight": "max.in.flight.requests.per.connection",
}


def _fields(config_class: type[Any], parsed: Mapping[str, Any], **computed: Any) -> dict[str, Any]:
    """The arguments of a settings dataclass: each field's parsed key, or its ``computed`` value."""
    keys = {
        f.name: _ATTRIBUTE_KEYS.get(f.name, f.name.replace("_", ".")) for f in fields(config_class)
    }
    return {name: parsed[key] for name, key in keys.items()} | computed


class _Transport:
    """What every client's settings say about TLS (Kafka's ``security.protocol`` and ``ssl.*``)."""

    __slots__ = ()
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of this client's HTTP connections (used only for https URLs)."""
        return client_ssl_context(
            self.ssl_ca_location, self.ssl_certificate_location, self.ssl_key_location
        )


@dataclass(frozen=True, slots=True)
class ProducerConfig(_Transport):
    """A producer's settings.

    ``batch.size`` defaults to 1,000,000 bytes rather than Kafka's 16 KiB: every request costs an
    HTTP round trip through the ASGI stack, so small batches would cap throughput at a few
    thousand requests per second; ``linger.ms`` still bounds latency. It stays below the
    broker's default ``max.message.bytes`` (1048588), which rejects larger batches.
    """

    bootstrap_servers: tuple[str, ...]
    client_id: str
    acks: int
    linger_ms: int
    batch_size: int
    compression: Compression
    retries: int
    retry_backoff_ms: int
    delivery_timeout_ms: int
    request_timeout_ms: int
    enable_idempotence: bool
    max_in_flight: int
    buffer_memory: int
    max_block_ms: int
    metadata_max_age_ms: int

    security_protocol: str
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None

    @classmethod
    def from_dict(cls, config: Mapping[str, object]) -> ProducerConfig:
        v = parse_config(config)
        idempotence: bool = v["enable.idempotence"]
        if v["acks"] != -1:
            # As Kafka's clients: idempotence needs acks=all; asking for both is a contradiction,
            # while lowering acks alone turns the default idempotence off.
            if "enable.idempotence" in config and idempotence:
                raise ValueError("enable.idempotence: requires acks=all")
            idempotence = False
        if idempotence and v["max.in.flight.requests.per.connection"] > 5:
            raise ValueError(
                "max.in.flight.requests.per.connection: at most 5 with enable.idempotence"
            )
        return cls(**_fields(cls, v, enable_idempotence=idempotence))


@dataclass(frozen=True, slots=True)
class ConsumerConfig(_Transport):
    """A consumer's settings (``group.id`` and the commit keys are used once groups exist)."""

    bootstrap_servers: tuple[str, ...]
    client_id: str
    request_timeout_ms: int
    retry_backoff_ms: int
    group_id: str | None
    auto_offset_reset: str
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    fetch_max_wait_ms: int
    max_poll_records: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    coordinator_url: str | None

    security_protocol: str
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None

    @classmethod
    def from_dict(cls, config: Mapping[str, object]) -> ConsumerConfig:
        return cls(**_fields(cls, parse_config(config)))


@dataclass(frozen=True, slots=True)
class AdminConfig(_Transport):
    """The admin client's settings."""

    bootstrap_servers: tuple[str, ...]
    client_id: str
    request_timeout_ms: int
    retry_backoff_ms: int

    security_protocol: str
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None

    @classmethod
    def from_dict(cls, config: Mapping[str, object]) -> AdminConfig:
        return cls(**_fields(cls, parse_config(config)))
