"""The ``headwater`` parser: a version, help for every argument, and one set of URL variables."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from headwater import __version__
from headwater_cli import build_parser
from headwater_cli.endpoints import BROKERS, COORDINATOR, REGISTRY, SERVICES, exports
from headwater_cli.topics import REQUEST_TIMEOUT, broker_config

# Every option that names a service URL, by command, and the service it reaches (validate's
# options come from the Spark job; they must read the same variables).
URL_OPTIONS = {
    "--bootstrap-server": BROKERS,
    "--brokers": BROKERS,
    "--registry": REGISTRY,
    "--coordinator": COORDINATOR,
}


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser in the tree with the words that reach it (``("topics", "alter")``)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"headwater {__version__}\n"


def test_every_argument_of_every_command_has_help() -> None:
    missing = [
        f"headwater {' '.join(path)}: {action.dest}"
        for path, parser in commands(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()
    ]
    assert missing == []


def test_url_options_read_the_variables_their_help_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for each in SERVICES:
        monkeypatch.setenv(each.variable, f"http://{each.variable.lower()}:1")
    seen = set()
    for path, parser in commands(build_parser()):
        for action in parser._actions:
            reached = [URL_OPTIONS[o] for o in action.option_strings if o in URL_OPTIONS]
            if not reached or path == ("up",):  # up --brokers is a count, not URLs
                continue
            service = reached[0]
            where = f"headwater {' '.join(path)} {action.option_strings[0]}"
            assert action.default == f"http://{service.variable.lower()}:1", where
            assert f"${service.variable}" in (action.help or ""), where
            assert service.default_url in (action.help or ""), where
            seen.add(path[0])
    assert seen == {
        "schemas",
        "validate",
        "topics",
        "cluster",
        "partitions",
        "produce",
        "consume",
        "groups",
    }


def test_up_exports_exactly_what_the_commands_read(monkeypatch: pytest.MonkeyPatch) -> None:
    exported = exports(1000)
    assert exported == {
        "HEADWATER_BROKERS": "http://127.0.0.1:9082",
        "HEADWATER_REGISTRY_URL": "http://127.0.0.1:9081",
        "HEADWATER_COORDINATOR": "http://127.0.0.1:9090",
    }
    for name, value in exported.items():
        monkeypatch.setenv(name, value)
    args = build_parser().parse_args(["consume", "orders", "--group", "g"])
    assert (args.bootstrap_server, args.coordinator) == (
        "http://127.0.0.1:9082",
        "http://127.0.0.1:9090",
    )
    assert build_parser().parse_args(["schemas", "get", "s"]).registry == "http://127.0.0.1:9081"


def test_the_top_level_help_lists_the_variables(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    for service in SERVICES:
        assert f"{service.variable}" in out
        assert service.default_url in out
    assert f"{REQUEST_TIMEOUT}  one request to the brokers, in ms (default 30000)" in out


def test_every_broker_command_takes_the_request_timeout_its_help_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(BROKERS.variable, "http://broker:1")
    monkeypatch.setenv(REQUEST_TIMEOUT, "1234")
    seen = set()
    for path, parser in commands(build_parser()):
        options = {o: a for a in parser._actions for o in a.option_strings}
        if "--bootstrap-server" not in options:
            continue
        where = f"headwater {' '.join(path)}"
        timeout = options.get("--request-timeout-ms")
        assert timeout is not None, where
        assert f"${REQUEST_TIMEOUT}" in (timeout.help or ""), where
        assert "30000" in (timeout.help or ""), where
        seen.add(path[0])
    assert seen == {"topics", "cluster", "partitions", "produce", "consume"}
    # What the clients are built with: the variable, else the default; the flag wins.
    args = build_parser().parse_args(["topics", "list"])
    assert broker_config(args) == {
        "bootstrap.servers": "http://broker:1",
        "request.timeout.ms": 1234,
    }
    args = build_parser().parse_args(["consume", "t", "--request-timeout-ms", "50"])
    assert broker_config(args)["request.timeout.ms"] == 50
    monkeypatch.delenv(REQUEST_TIMEOUT)
    assert build_parser().parse_args(["produce", "t"]).request_timeout_ms == 30000


@pytest.mark.parametrize("given", ["0", "-5", "soon"])
def test_a_request_timeout_that_is_not_a_positive_whole_number_is_a_usage_error(
    given: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["topics", "list", "--request-timeout-ms", given])
    assert done.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"error: argument --request-timeout-ms: expected milliseconds, 1 or more, got {given!r}\n"
    )
    monkeypatch.setenv(REQUEST_TIMEOUT, given)  # the same from the variable
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["topics", "list"])
    assert done.value.code == 2
    assert f"got {given!r}" in capsys.readouterr().err
