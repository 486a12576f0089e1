"""Controlled shutdown of a one-broker cluster, in process (ASGI transport, real storage).

The drain run on SIGTERM (``Broker.controlled_shutdown``) records the broker ``shutting_down``;
a partition with no other in-sync replica goes offline then (leader -1), and the broker leads
nothing. The route brokers use to ask the controller refuses bad bodies and stale epochs
without changing anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater_broker.controller_requests import SHUTDOWN_PATH
from tests.integration.broker.in_process import broker_app

pytestmark = pytest.mark.anyio


async def test_the_shutdown_route_refuses_bad_bodies_and_stale_epochs(tmp_path: Path) -> None:
    async with broker_app(tmp_path) as (broker, client):
        epoch = broker.node.broker_epoch
        missing = await client.post(SHUTDOWN_PATH, json={"broker_id": 0})
        assert missing.status_code == 400
        assert missing.json()["error_code"] == 40002
        assert "broker_epoch" in missing.json()["message"]
        stale = await client.post(SHUTDOWN_PATH, json={"broker_id": 0, "broker_epoch": epoch + 7})
        assert stale.status_code == 409
        assert stale.json()["error_code"] == 40907
        brokers = (await client.get("/cluster")).json()["brokers"]
        assert [b["state"] for b in brokers] == ["active"]


async def test_the_drain_moves_every_leadership_off_the_broker(tmp_path: Path) -> None:
    async with broker_app(tmp_path) as (broker, _client):
        await broker.admin.create_topic("alone", 2)
        await broker.replicas_settled()
        assert len(broker.registry.leading()) == 2
        await broker.controlled_shutdown()
        image = broker.image
        assert image.brokers[broker.broker_id].state.value == "shutting_down"
        assert not image.led_by(broker.broker_id)
        assert not broker.registry.leading()
        # One replica: no other in-sync replica to take over, so the partitions are offline.
        assert [p.leader for p in image.partitions_of("alone")] == [-1, -1]
