"""Building blocks of the long-term conformance suite: the kit a backend provides, events, helpers.

A :class:`LongTermKit` hands out backends: :meth:`~LongTermKit.fresh` on
empty long-term storage, :meth:`~LongTermKit.twin` on the *same* storage as
another worker (another process) would open it, and
:meth:`~LongTermKit.new_session` to end the active session the way a
rotation does (the next running summary is a new session's).
:class:`FileLongTermKit` is the file backend's kit; the PostgreSQL kit lives
with its tests (it needs a server). No pytest here.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar

from aiden.config import Config
from aiden.events import SessionEvent
from aiden.longterm.backend import LongTermBackend
from aiden.longterm.files import running_summary_path
from aiden.longterm.service import FileLongTermBackend
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer

__all__ = ["NOW", "FileLongTermKit", "LongTermKit", "raises", "said"]

NOW = 1_767_225_600.0
"""The suite's clock (2026-01-01T00:00:00Z): every ``now`` is an offset from it."""

E = TypeVar("E", bound=BaseException)


class LongTermKit(Protocol):
    """What a long-term backend provides to the conformance suite."""

    def fresh(self, config: Config | None = None) -> LongTermBackend:
        """A backend on empty long-term storage (``config`` default: ``Config()``; extractive summaries)."""
        ...

    def twin(self, backend: LongTermBackend) -> LongTermBackend:
        """Another backend on ``backend``'s storage and session, as a second worker opens it."""
        ...

    def new_session(self, backend: LongTermBackend) -> None:
        """End ``backend``'s session as a rotation does: the running summary stays with the old one."""
        ...


def said(seq: int, text: str) -> SessionEvent:
    """A user's message at ``seq``."""
    return SessionEvent(type="user_input", role="user", seq=seq, content=text)


async def raises(kind: type[E], call: Callable[[], Awaitable[object]]) -> E:
    """Await ``call()``; return the ``kind`` it raised, AssertionError when it raised nothing."""
    try:
        await call()
    except kind as exc:
        return exc
    raise AssertionError(f"{kind.__name__} was not raised")


class FileLongTermKit:
    """The file backend's kit: each fresh backend gets its own root under ``tmp``."""

    def __init__(self, tmp: Path) -> None:
        self._tmp = tmp
        self._count = itertools.count()
        # Every backend handed out, with its root and config (kept alive: looked up by identity).
        self._made: list[tuple[LongTermBackend, Layout, Config]] = []

    def _open(self, layout: Layout, config: Config) -> FileLongTermBackend:
        backend = FileLongTermBackend(layout, Storage(), config, ExtractiveSummarizer())
        self._made.append((backend, layout, config))
        return backend

    def _of(self, backend: LongTermBackend) -> tuple[Layout, Config]:
        return next((layout, config) for made, layout, config in self._made if made is backend)

    def fresh(self, config: Config | None = None) -> LongTermBackend:
        """A backend on a new root (its session directory made, as the session store does at open)."""
        layout = Layout(self._tmp / f"root-{next(self._count)}")
        storage = Storage()
        storage.mkdir(layout.session)
        return self._open(layout, config or Config())

    def twin(self, backend: LongTermBackend) -> LongTermBackend:
        """A second backend on the same root, with its own objects (its own locks, as another process)."""
        return self._open(*self._of(backend))

    def new_session(self, backend: LongTermBackend) -> None:
        """Rotation moves ``session/`` (the running summary with it) into the archive."""
        layout, _ = self._of(backend)
        storage = Storage()
        storage.unlink(running_summary_path(layout))
