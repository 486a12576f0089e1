"""``Closeable``: the one context-manager mixin, for every object that ``with`` opens and closes.

A class names the methods that open and close it in its header, and gets ``__enter__`` /
``__exit__`` typed with ``Self``::

    class Producer(Closeable):                                   # with p: ... ; p.close()
    class ServiceProcess(Closeable, opens_with="start", closes_with="stop")

``opens_with`` (none by default: the object is usable once built) is called on entering and its
result ignored, since ``with x as y`` binds ``x`` itself; ``closes_with`` (``close`` by default) is
called on leaving, whether or not an exception is on its way, and does not suppress it.
Subclasses inherit their parent's choice unless they name their own.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, ClassVar, Self


class Closeable:
    """Mixin: ``with obj as o`` calls ``obj.<opens_with>()`` (if any), binds ``obj``, and calls
    ``obj.<closes_with>()`` on leaving."""

    __slots__ = ()

    _opens_with: ClassVar[str | None] = None
    _closes_with: ClassVar[str] = "close"

    def __init_subclass__(
        cls, *, opens_with: str | None = None, closes_with: str | None = None, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if opens_with is not None:
            cls._opens_with = opens_with
        if closes_with is not None:
            cls._closes_with = closes_with
        # A misspelt method name fails when the class is defined, not at the end of a with block.
        for name in (cls._opens_with, cls._closes_with):
            if name is not None and not callable(getattr(cls, name, None)):
                raise TypeError(f"{cls.__qualname__} has no method {name}() to open or close it")

    def __enter__(self) -> Self:
        if self._opens_with is not None:
            opener: Callable[[], object] = getattr(self, self._opens_with)
            opener()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        closer: Callable[[], object] = getattr(self, self._closes_with)
        closer()
