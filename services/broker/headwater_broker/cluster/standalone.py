"""A cluster node without a broker, as a process: ``python -m headwater_broker.cluster.standalone``.

It registers a broker id, follows the metadata and runs the controller loop against a metadata
URL, printing one JSON line per event on stdout (``registered``, ``elected``, ``stepped_down``,
``probe``, ``replaced``, ``stopped``), so fault tests can kill -9, SIGSTOP and SIGCONT a real
controller process. SIGTERM or SIGINT stops it cleanly (lease resigned, session released).

``--probe-topic T`` makes it, once elected, create topic ``T`` and alter its config every
``--probe-every-ms``: through the controller while it is the controller, and afterwards straight
to the store *with the epoch it was last elected at*, as a controller paused mid-decision would
write on resume. Each attempt prints ``{"event": "probe", "epoch", "value", "path", "ok",
"error"}``; a deposed controller's attempts must all be refused, which the tests check against
the tables (``tests/e2e/cluster/test_controller_processes.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from dataclasses import replace
from typing import Any

import orjson

from headwater.errors import HeadwaterError
from headwater_broker.cluster.node import ClusterNode
from headwater_broker.cluster.settings import ClusterSettings
from headwater_broker.cluster.store import ImageBehindError
from headwater_kernel.tasks import cancel_and_wait


def emit(event: str, **fields: Any) -> None:
    line = {"event": event, "t": time.time(), **fields}
    sys.stdout.write(orjson.dumps(line).decode() + "\n")
    sys.stdout.flush()


class Probe:
    """Creates the probe topic once elected, then alters its config every interval.

    While this node is the active controller the change goes through the controller's admin
    path; once it is not (deposed, or its lease ran out while it was stopped), it keeps
    writing *with the epoch it was last elected at* straight to the store, as a controller
    paused mid-decision would on resume. Values encode the epoch: ``epoch * 1_000_000 + n``.
    """

    def __init__(self, topic: str, every_ms: int) -> None:
        self.topic = topic
        self.every_ms = every_ms
        self.elected_epoch: int | None = None

    def on_controller_event(self, event: str, fields: dict[str, Any]) -> None:
        if event == "elected":
            self.elected_epoch = int(fields["epoch"])
        emit(event, **fields)

    async def run(self, node: ClusterNode) -> None:
        count = 0
        while True:
            await asyncio.sleep(self.every_ms / 1000)
            epoch = self.elected_epoch
            if epoch is None:
                continue
            if node.is_controller and self.topic not in node.image.topics:
                with contextlib.suppress(HeadwaterError):
                    await node.controller.create_topic(self.topic, 1, replication_factor=1)
            current = node.image.topics.get(self.topic)
            if current is None:
                continue
            count += 1
            value = str(epoch * 1_000_000 + count)
            path = "controller" if node.is_controller else "raw"
            error: str | None = None
            try:
                if path == "controller":
                    await node.controller.alter_configs(self.topic, {"retention.ms": value})
                else:
                    altered = replace(current, configs={"retention.ms": value})
                    await node.store.call(
                        node.store.write_changes,
                        epoch,
                        node.broker_id,
                        node.image.offset,
                        [altered],
                    )
            except HeadwaterError as exc:
                error = type(exc).__name__
            except ImageBehindError:
                error = "ImageBehindError"
            emit("probe", epoch=epoch, value=value, path=path, ok=error is None, error=error)


async def main(args: argparse.Namespace) -> int:
    settings = ClusterSettings(
        metadata_url=args.metadata_url,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        controller_lease_ms=args.controller_lease_ms,
        metadata_poll_ms=args.metadata_poll_ms,
        rack=args.rack,
    )
    probe = Probe(args.probe_topic or "", args.probe_every_ms)
    node = ClusterNode(
        settings, args.broker_id, args.url, on_controller_event=probe.on_controller_event
    )
    try:
        await node.start(register_wait_ms=args.register_wait_ms)
    except HeadwaterError as exc:
        emit("refused", error=type(exc).__name__, message=exc.message)
        return 2
    emit(
        "registered",
        broker_id=node.broker_id,
        epoch=node.broker_epoch,
        incarnation=node.registration.incarnation,
        cluster_id=node.store.cluster_id,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    extra: list[asyncio.Task[None]] = []
    if args.probe_topic:
        extra.append(asyncio.create_task(probe.run(node)))
    replaced = asyncio.create_task(node.replaced.wait())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([replaced, stopping], return_when=asyncio.FIRST_COMPLETED)
    await cancel_and_wait([*extra, replaced, stopping])
    for task in [*extra, replaced, stopping]:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if node.replaced.is_set():
        emit("replaced")
    await node.stop()
    emit("stopped")
    return 1 if node.replaced.is_set() else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m headwater_broker.cluster.standalone")
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--url", required=True, help="the URL this broker would advertise")
    parser.add_argument("--metadata-url", required=True)
    parser.add_argument("--rack")
    parser.add_argument("--session-timeout-ms", type=int, default=1500)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=250)
    parser.add_argument("--controller-lease-ms", type=int, default=2000)
    parser.add_argument("--metadata-poll-ms", type=int, default=100)
    parser.add_argument("--register-wait-ms", type=int, default=None)
    parser.add_argument("--probe-topic")
    parser.add_argument("--probe-every-ms", type=int, default=50)
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
