"""JSON log lines: fields, extras, exceptions, and the request id of the request being served."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from headwater_kernel import logs
from headwater_kernel.app import create_service_app


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Route the root logger to a buffer as JSON, then put the previous handlers back."""
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    stream = io.StringIO()
    logs.configure("debug", stream=stream, service="unit")
    yield stream
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved_handlers:
        root.addHandler(handler)
    root.setLevel(saved_level)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_record_is_one_json_object_with_static_fields_and_extras(captured: io.StringIO) -> None:
    logging.getLogger("tests.logs").info("topic %s created", "orders", extra={"partitions": 3})
    [line] = lines(captured)
    assert set(line) == {"ts", "level", "logger", "message", "service", "partitions"}
    assert line["level"] == "INFO"
    assert line["logger"] == "tests.logs"
    assert line["message"] == "topic orders created"
    assert line["service"] == "unit"
    assert line["partitions"] == 3
    assert isinstance(line["ts"], str)
    assert line["ts"].endswith("Z")
    assert len(line["ts"]) == len("2026-11-25T21:40:00.123Z")


def test_uvicorn_terminal_colours_are_left_out(captured: io.StringIO) -> None:
    logging.getLogger("uvicorn.error").info(
        "Started server process [%d]", 42, extra={"color_message": "\x1b[36m%d\x1b[0m"}
    )
    [line] = lines(captured)
    assert line == {
        "ts": line["ts"],
        "level": "INFO",
        "logger": "uvicorn.error",
        "message": "Started server process [42]",
        "service": "unit",
    }


def test_exceptions_are_kept_in_one_line(captured: io.StringIO) -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        logging.getLogger("tests.logs").exception("failed")
    text = captured.getvalue()
    assert text.count("\n") == 1
    [line] = lines(captured)
    assert line["message"] == "failed"
    assert isinstance(line["exc"], str)
    assert line["exc"].startswith("Traceback")
    assert line["exc"].endswith("ValueError: bad\nvalue")


def test_configure_twice_does_not_duplicate_lines(captured: io.StringIO) -> None:
    logs.configure("info", stream=captured)
    logging.getLogger("tests.logs").info("once")
    logging.getLogger("tests.logs").debug("filtered out at info")
    assert [line["message"] for line in lines(captured)] == ["once"]


def test_log_lines_inside_a_request_carry_its_id(captured: io.StringIO) -> None:
    app = create_service_app(title="logs test", description="tiny app")

    @app.get("/logs-hello")
    async def hello() -> dict[str, str]:
        logging.getLogger("tests.logs").info("inside")
        return {"ok": "yes"}

    with TestClient(app) as client:
        response = client.get("/logs-hello", headers={"X-Request-ID": "req-42"})
        assert response.headers["X-Request-ID"] == "req-42"
        client.get("/logs-hello")
    logging.getLogger("tests.logs").info("outside")
    by_message: dict[str, list[dict[str, object]]] = {}
    for line in lines(captured):
        by_message.setdefault(str(line["message"]), []).append(line)
    assert by_message["inside"][0]["request_id"] == "req-42"
    assert len(by_message["inside"]) == 2
    assert by_message["inside"][1]["request_id"] != "req-42"
    assert "request_id" not in by_message["outside"][0]
    access = [
        line
        for line in by_message["request"]
        if line["logger"] == "headwater.access" and line["request_id"] == "req-42"
    ]
    assert len(access) == 1
    assert access[0]["method"] == "GET"
    assert access[0]["path"] == "/logs-hello"
    assert access[0]["route"] == "/logs-hello"
    assert access[0]["status"] == 200
    assert isinstance(access[0]["duration_ms"], float)


class Terminal(io.StringIO):
    """A text stream that says it is a terminal, as stderr does under `make up`."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved_handlers:
        root.addHandler(handler)
    root.setLevel(saved_level)


@pytest.mark.usefixtures("restore_root")
def test_a_terminal_gets_readable_lines_and_the_format_can_be_forced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HEADWATER_LOG_FORMAT", raising=False)
    terminal = Terminal()
    logs.configure("info", stream=terminal, service="broker")
    logging.getLogger("headwater.broker").info("created topic %s", "orders")
    [line] = terminal.getvalue().splitlines()
    assert line.endswith(" INFO  broker  headwater.broker: created topic orders")

    monkeypatch.setenv("HEADWATER_LOG_FORMAT", "json")
    forced = Terminal()
    logs.configure("info", stream=forced, service="broker")
    logging.getLogger("headwater.broker").info("created topic %s", "orders")
    [record] = [json.loads(x) for x in forced.getvalue().splitlines()]
    assert (record["service"], record["message"]) == ("broker", "created topic orders")
