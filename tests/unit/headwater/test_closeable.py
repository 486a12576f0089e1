"""The Closeable mixin: ``with`` opens and closes through the methods a class names."""

from __future__ import annotations

import pytest

from headwater.closeable import Closeable


class Resource(Closeable):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def close(self) -> None:
        self.calls.append("close")


class Process(Closeable, opens_with="start", closes_with="stop"):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def start(self) -> Process:
        self.calls.append("start")
        return self

    def stop(self) -> None:
        self.calls.append("stop")


class NamedProcess(Process):
    """Inherits its parent's start/stop."""


def test_with_binds_the_object_and_closes_it() -> None:
    resource = Resource()
    with resource as bound:
        assert bound is resource
        assert resource.calls == []
    assert resource.calls == ["close"]


def test_named_methods_open_and_close_and_subclasses_inherit_them() -> None:
    for process in (Process(), NamedProcess()):
        with process as bound:
            assert bound is process
            assert process.calls == ["start"]
        assert process.calls == ["start", "stop"]


def test_an_exception_closes_and_propagates() -> None:
    process = Process()
    with pytest.raises(KeyError, match="boom"), process:
        raise KeyError("boom")
    assert process.calls == ["start", "stop"]


def test_a_misspelt_method_fails_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match=r"Broken has no method stpo\(\)"):

        class Broken(Closeable, closes_with="stpo"):
            def stop(self) -> None:
                pass

    with pytest.raises(TypeError, match=r"NoClose has no method close\(\)"):

        class NoClose(Closeable):
            pass
