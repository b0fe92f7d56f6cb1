"""The caller side of the long-term actor: one method per request.

Held by ``Memory`` (tools, checkpoint, Dream), the maintenance scheduler's
hooks and the runtime's close; imported with the first open, like the rest of
long-term memory (Dream's git store loads dulwich).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from aiden.actors.mailbox import Client, Latest
from aiden.events import SessionEvent
from aiden.longterm.dream import DreamOutcome
from aiden.longterm.messages import (
    Checkpoint,
    Checkpointed,
    Dreamed,
    DreamLog,
    DreamRequested,
    DreamRestore,
    EndSession,
    ForgetMemory,
    LongTermDone,
    LongTermInbox,
    LongTermLayer,
    LongTermOutbox,
    MergeRunning,
    RecordChunk,
    Refresh,
    RequestDream,
    Restored,
    RunDream,
    SaveMemory,
    ToolAnswered,
    Versions,
)
from aiden.longterm.tools import SaveRequest
from aiden.longterm.versions import Version
from aiden.observe import observed
from aiden.ports import expect_reply
from aiden.storage.chunks import ChunkEntry

__all__ = ["LongTermPort"]

R = TypeVar("R")


class LongTermPort:
    """Requests to the long-term actor and its published prompt layer."""

    __slots__ = ("_client", "_layer")

    def __init__(self, client: Client[LongTermInbox, LongTermOutbox], layer: Latest[LongTermLayer]) -> None:
        self._client = client
        self._layer = layer

    @property
    def layer(self) -> str:
        """The PROJECT MEMORY block and profile as last loaded."""
        return self._layer.value.text

    async def _ask(self, build: Callable[[int], LongTermInbox], kind: type[R]) -> R:
        return expect_reply(await self._client.call(build), kind)

    @observed("update_memory")
    async def save_memory(self, request: SaveRequest) -> str:
        """Run a decoded ``save_memory`` call; the JSON result text for the model."""
        return (await self._ask(lambda rid: SaveMemory(rid, request), ToolAnswered)).text

    @observed("delete_memory")
    async def forget_memory(self, memory_id: str) -> str:
        """Run a decoded ``forget_memory`` call; the JSON result text for the model."""
        return (await self._ask(lambda rid: ForgetMemory(rid, memory_id), ToolAnswered)).text

    async def merge_running(self, events: Sequence[SessionEvent]) -> None:
        """Merge the about-to-be-compacted events into the running summary (the scheduler's hook)."""
        await self._ask(lambda rid: MergeRunning(rid, list(events)), LongTermDone)

    async def record_chunk(self, entry: ChunkEntry, session_key: str) -> None:
        """Record a committed chunk in history.jsonl (the scheduler's hook)."""
        await self._ask(lambda rid: RecordChunk(rid, entry, session_key), LongTermDone)

    async def end_session(
        self, events: Sequence[SessionEvent], reason: str, summarizer_timeout_s: float | None = None
    ) -> None:
        """Write the dated session summary of the closing hot window."""
        await self._ask(
            lambda rid: EndSession(
                request_id=rid, events=list(events), reason=reason, summarizer_timeout_s=summarizer_timeout_s
            ),
            LongTermDone,
        )

    async def checkpoint(self, events: Sequence[SessionEvent]) -> str | None:
        """Force a durable session summary now; the file written (None: nothing to write)."""
        return (await self._ask(lambda rid: Checkpoint(rid, list(events)), Checkpointed)).path

    async def refresh(self) -> None:
        """Reload and republish the prompt layer (after rotation)."""
        await self._ask(Refresh, LongTermDone)

    async def dream(self) -> DreamOutcome:
        """Run Dream now."""
        return (await self._ask(RunDream, Dreamed)).outcome

    async def request_dream(self) -> bool:
        """Ask the scheduled Dream task to run now; False if already requested."""
        return (await self._ask(RequestDream, DreamRequested)).accepted

    async def dream_log(self, limit: int) -> list[Version]:
        """The newest ``limit`` versions of the long-term files, newest first."""
        return (await self._ask(lambda rid: DreamLog(rid, limit), Versions)).versions

    async def dream_restore(self, target: str | int) -> Version:
        """Bring back version ``target`` (an id or prefix, or steps back) as a new version; the new one."""
        return (await self._ask(lambda rid: DreamRestore(rid, target), Restored)).version
