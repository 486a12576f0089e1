"""What a test needs from the machine (tests/conftest.py): skipped with the reason on a laptop
without it, failed when CI=true."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import conftest


@pytest.fixture
def java_missing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    conftest._present.cache_clear()
    monkeypatch.setitem(conftest.NEEDS, "java", (lambda: False, "no `java` on PATH"))
    yield
    conftest._present.cache_clear()


@pytest.mark.usefixtures("java_missing")
def test_a_missing_need_skips_with_its_reason_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^needs java: no `java` on PATH$"):
        conftest.require("java")


@pytest.mark.usefixtures("java_missing")
def test_a_missing_need_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"needs java: no `java` on PATH; CI=true"):
        conftest.require("java")


def test_a_present_need_passes_and_an_unknown_one_is_a_mistake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conftest._present.cache_clear()
    monkeypatch.setitem(conftest.NEEDS, "java", (lambda: True, "unused"))
    monkeypatch.setenv("CI", "true")
    conftest.require("java")
    conftest._present.cache_clear()
    with pytest.raises(ValueError, match="unknown need 'kafka'"):
        conftest.require("kafka")
