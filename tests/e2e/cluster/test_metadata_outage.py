"""The metadata database (a private PostgreSQL) stopped and started again under load.

Produce and fetch to partitions whose leaders are settled keep working while the database is
down; topic admin fails cleanly (503 with its code, never a 500) and works again once the
database is back; every acknowledged record is there afterwards. The PostgreSQL server is this
test's own (initdb + pg_ctl as the postgres user, its own port, a temporary directory), so
stopping it disturbs nobody else.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster.cluster_processes import LEASE_S, running_cluster, wait_for
from tests.support import free_port, unique

pytestmark = pytest.mark.e2e

OUTAGE_S = 3 * LEASE_S  # past the controller's lease and every session timeout


def _pg_bin(name: str) -> str | None:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(found[-1]) if found else shutil.which(name)


class PrivatePostgres:
    """A PostgreSQL server in a temporary directory on its own loopback port."""

    def __init__(self) -> None:
        initdb, self.pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        if initdb is None or self.pg_ctl is None or shutil.which("runuser") is None:
            pytest.skip("initdb, pg_ctl or runuser not installed")
        self.root = Path(tempfile.mkdtemp(prefix="hw-pg-"))
        shutil.chown(self.root, "postgres", "postgres")
        self.data = self.root / "data"
        self.port = free_port()
        self._as_postgres(initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *command: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *command],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        assert self.pg_ctl is not None
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}"
        self._as_postgres(
            self.pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w",
            "start",
        )  # fmt: skip

    def stop(self) -> None:
        assert self.pg_ctl is not None
        self._as_postgres(self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", str(self.pg_ctl), "-D", str(self.data),
             "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.remove()


def test_produce_and_fetch_survive_a_metadata_outage_and_admin_recovers(
    tmp_path: Path, postgres: PrivatePostgres
) -> None:
    with running_cluster(tmp_path, postgres.url, 2) as cluster:
        topic = unique("outage")
        created = cluster.post(0, "/topics", json={"name": topic, "replica_assignment": [[0], [1]]})
        assert created.status_code == 201, created.text

        def leads_its_partition(broker_id: int) -> bool:
            # The create is answered once the controller committed it; each broker learns of it
            # within a metadata poll, and must know it leads before the load starts.
            answer = cluster.get(broker_id, f"/topics/{topic}")
            if answer.status_code != 200:
                return False
            partitions = answer.json()["partitions"]
            return bool(partitions[broker_id]["leader"] == broker_id)

        wait_for(lambda: all(leads_its_partition(b) for b in (0, 1)), 10, "both leaders known")
        acknowledged: dict[int, list[str]] = {0: [], 1: []}
        failures: list[str] = []
        stop = threading.Event()

        def load(partition: int) -> None:
            n = 0
            while not stop.is_set():
                value = f"p{partition}-{n}"
                answer = cluster.produce(partition, topic, partition, value.encode())
                if answer.status_code == 200:
                    acknowledged[partition].append(value)
                else:
                    failures.append(f"{answer.status_code} {answer.text}")
                n += 1
                time.sleep(0.02)

        threads = [threading.Thread(target=load, args=(p,)) for p in (0, 1)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(0.5)
            postgres.stop()
            down_at = {p: len(v) for p, v in acknowledged.items()}
            time.sleep(OUTAGE_S)
            # While the store is down: produce and fetch go on, admin fails cleanly.
            assert all(len(acknowledged[p]) > down_at[p] + 10 for p in (0, 1)), acknowledged
            assert cluster.values(1, topic, 1)[: down_at[1]] == acknowledged[1][: down_at[1]]
            refused = cluster.post(1, "/topics", json={"name": unique("during")})
            assert refused.status_code == 503, refused.text
            assert refused.json()["error_code"] in (50305, 50306)
            assert refused.headers["retry-after"] == "1"
            postgres.start()
            later = unique("later")
            wait_for(
                lambda: cluster.post(1, "/topics", json={"name": later}).status_code == 201,
                60,
                "topic admin working again",
            )
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
        assert failures == []
        for p in (0, 1):
            assert cluster.values(1 - p, topic, p) == acknowledged[p]
        brokers = {b["broker_id"]: b["state"] for b in cluster.cluster(0)["brokers"]}
        assert brokers == {0: "active", 1: "active"}  # nobody was fenced for the outage
