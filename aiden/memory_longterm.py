"""Long-term memory's part of :class:`~aiden.memory.Memory`: prompt layer, checkpoint, Dream and its versions.

A base class of ``Memory`` over :class:`~aiden.memory_core.CoreMemory`:
everything here forwards to the long-term actor's port, whichever backend
(files under the root, or PostgreSQL) holds the long-term state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiden.errors import ClosedError
from aiden.longterm.dream_edits import check_target
from aiden.longterm.tools import LongTermTools
from aiden.memory_core import CoreMemory
from aiden.tools import ToolSet

if TYPE_CHECKING:
    from aiden.longterm.dream import DreamOutcome
    from aiden.longterm.dream_edits import Version
    from aiden.longterm.messages import LongTermPort

__all__ = ["LongTermMethods"]


class LongTermMethods(CoreMemory):
    """Long-term memory operations of an open memory (a base class of :class:`~aiden.memory.Memory`)."""

    def __init__(self, *, long_term: LongTermPort | None = None, **core: Any) -> None:
        super().__init__(**core)
        self._long_term = long_term

    def _lt(self) -> LongTermPort:
        if self._long_term is None:
            raise ClosedError("long-term memory is not available")
        return self._long_term

    def _tool_sets(self) -> list[ToolSet]:
        # ``save_memory`` and ``forget_memory`` (the long-term actor's port is asked for at each call).
        return [*super()._tool_sets(), LongTermTools(self._lt)]

    @property
    def long_term_layer(self) -> str:
        """The PROJECT MEMORY block and profile, as placed in the system prompt."""
        return self._long_term.layer if self._long_term is not None else ""

    async def checkpoint(self) -> str | None:
        """Force a durable session summary now (seed 004's manual checkpoint); its path (None: nothing to write)."""
        self._check_open()
        return await self._lt().checkpoint(await self._reader.hot_window())

    async def dream(self) -> DreamOutcome:
        """Run Dream now: fold new history into SOUL.md / USER.md / MEMORY.md (git-versioned)."""
        self._check_open()
        return await self._lt().dream()

    async def request_dream(self) -> bool:
        """Ask the scheduled Dream task to run soon, without waiting; False if a run is already requested."""
        self._check_open()
        return await self._lt().request_dream()

    async def dream_log(self, limit: int = 20) -> list[Version]:
        """The newest ``limit`` versions of SOUL.md / USER.md / MEMORY.md, newest first."""
        self._check_open()
        return await self._lt().dream_log(limit)

    async def dream_restore(self, version: str | int) -> Version:
        """Bring back a version of SOUL.md / USER.md / MEMORY.md as a new version; returns the new one.

        ``version`` is a commit id or unique prefix (4+ hex digits, as
        :meth:`dream_log` lists them) or steps back from the newest (``1`` = the
        one before), as ``aiden restore`` takes it. Runs under Dream's lock (the
        file root's ``.dream.lock``, PostgreSQL's advisory lock): while another
        process runs Dream it raises :class:`~aiden.errors.DreamError`. An
        unknown version raises :class:`~aiden.errors.VersionNotFoundError`, with
        the same message on every backend. Hand edits of the files are first
        recorded as a version on the file backend, so a restore can be undone.
        """
        self._check_open()
        # A bad target (a float, a bool, not hex) fails here with the backends' message,
        # instead of as a message the actor cannot decode.
        check_target(version)
        return await self._lt().dream_restore(version)
