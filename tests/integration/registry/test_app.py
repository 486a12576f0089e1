"""The app's error mapping: Confluent-shaped request errors, a lost database as 50001."""

from __future__ import annotations

from fastapi.testclient import TestClient

from headwater_registry.app import create_app
from headwater_registry.settings import RegistrySettings
from tests.integration.registry.support import MEDIA, V1, error
from tests.support import unique


def test_request_errors_are_confluent_shaped(api: TestClient) -> None:
    s = unique("e")
    r = api.post(f"/subjects/{s}/versions", content=b"{nope", headers={"content-type": MEDIA})
    assert r.status_code == 400
    assert r.headers["content-type"] == MEDIA
    assert error(api.post(f"/subjects/{s}/versions", json={"schem": V1})) == (422, 422)
    invalid = api.post(f"/subjects/{s}/versions", json={"schema": '{"type":"nope"}'})
    assert error(invalid) == (422, 42201)
    assert error(api.get(f"/subjects/{s}/versions/0")) == (422, 42202)
    assert error(api.get("/schemas/ids/987654321")) == (404, 40403)
    assert error(api.get(f"/subjects/{s}/versions/latest")) == (404, 40401)
    protobuf = api.post(
        f"/subjects/{s}/versions", json={"schema": "syntax = 'proto3';", "schemaType": "PROTOBUF"}
    )
    assert error(protobuf) == (422, 42201)


def test_database_gone_is_50001(postgres_url: str) -> None:
    import sqlalchemy

    from tests.conftest import POSTGRES_ADMIN_URL

    with TestClient(create_app(RegistrySettings(database_url=postgres_url))) as client:
        assert client.get("/subjects").status_code == 200
        admin = sqlalchemy.create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
        name = postgres_url.rsplit("/", 1)[1]
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()
        r = client.get("/subjects")
        assert r.status_code == 500
        assert r.json()["error_code"] == 50001
        assert r.json()["message"].startswith("Error in the backend data store: OperationalError")
        assert client.get("/readyz").status_code == 503
