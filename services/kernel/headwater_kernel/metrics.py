"""HTTP request metrics every service exports, and the Prometheus text exposition of ``/metrics``.

Everything lives in prometheus_client's default registry, so the domain metrics a service defines
at module level in its own ``headwater_<name>/metrics.py`` appear on the same ``/metrics`` page as
these, next to the process and GC collectors prometheus_client registers by default.

Exported here::

    headwater_http_requests_total{method, route, status}       counter
    headwater_http_request_duration_seconds{method, route}     histogram (seconds, to last byte)

``route`` is the route *template* (``/topics/{topic}/partitions/{partition}``), never the raw
path, so the number of series stays bounded by the number of routes; requests no route matched
share ``route="unmatched"``.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest

UNMATCHED_ROUTE = "unmatched"

# Methods outside this set share one label value: a client cannot mint new series by inventing
# methods.
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# From sub-millisecond in-memory answers up to long-poll fetches (max_wait_ms) of several seconds.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

HTTP_REQUESTS = Counter(
    "headwater_http_requests",
    "HTTP requests served, by method, route template and response status.",
    ["method", "route", "status"],
)
HTTP_REQUEST_DURATION = Histogram(
    "headwater_http_request_duration_seconds",
    "Time from request start to the last response byte, by method and route template.",
    ["method", "route"],
    buckets=LATENCY_BUCKETS,
)


class HTTPRequestRecorder:
    """Records one finished request into the HTTP metrics, with the labelled children cached.

    ``Counter.labels()`` validates and takes a lock on every call; the broker serves many small
    requests per second, so the children are looked up once per (method, route, status) and kept
    in a plain dict. The key space is bounded: known methods x route templates x statuses.
    """

    def __init__(self) -> None:
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def record(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        children = self._children.get(key)
        if children is None:
            label_method = method if method in _KNOWN_METHODS else "OTHER"
            children = (
                HTTP_REQUESTS.labels(label_method, route, str(status)),
                HTTP_REQUEST_DURATION.labels(label_method, route),
            )
            self._children[key] = children
        counter, histogram = children
        counter.inc()
        histogram.observe(seconds)


def exposition() -> tuple[bytes, str]:
    """The default registry in Prometheus text format, and the content type to serve it with."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
