"""Messages of the long-term memory actor (one request union, one reply union) and its caller side, :class:`LongTermPort`.

The prompt layer is published as a :class:`LongTermLayer` snapshot, so building a prompt never waits on the actor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import msgspec

from aiden.actors.mailbox import Client, Latest
from aiden.context.summary_fit import LayerSection, LongTermText
from aiden.events import SessionEvent
from aiden.longterm.dream import DreamOutcome
from aiden.longterm.dream_edits import Version
from aiden.longterm.tools import SaveRequest
from aiden.messages import Failed
from aiden.observe import observed
from aiden.ports import expect_reply
from aiden.storage.chunks import ChunkEntry

__all__ = [
    "Checkpoint",
    "Checkpointed",
    "DreamLog",
    "DreamRequested",
    "DreamRestore",
    "Dreamed",
    "EndSession",
    "ForgetMemory",
    "LongTermDone",
    "LongTermInbox",
    "LongTermLayer",
    "LongTermOutbox",
    "LongTermPort",
    "MergeRunning",
    "RecordChunk",
    "Refresh",
    "RequestDream",
    "Restored",
    "RunDream",
    "SaveMemory",
    "ToolAnswered",
    "Versions",
]


class SaveMemory(msgspec.Struct, frozen=True, tag=True):
    """Run a decoded ``save_memory`` tool call."""

    request_id: int
    request: SaveRequest


class ForgetMemory(msgspec.Struct, frozen=True, tag=True):
    """Run a decoded ``forget_memory`` tool call."""

    request_id: int
    memory_id: str


class MergeRunning(msgspec.Struct, frozen=True, tag=True):
    """Merge the about-to-be-compacted events into the running summary."""

    request_id: int
    events: list[SessionEvent]


class RecordChunk(msgspec.Struct, frozen=True, tag=True):
    """Record a committed chunk's summary in history.jsonl, Dream's source."""

    request_id: int
    entry: ChunkEntry
    session_key: str


class EndSession(msgspec.Struct, frozen=True, tag=True):
    """Write the dated session summary of ``events`` (the closing hot window)."""

    request_id: int
    events: list[SessionEvent]
    reason: str
    summarizer_timeout_s: float | None


class Checkpoint(msgspec.Struct, frozen=True, tag=True):
    """Force a durable session summary now."""

    request_id: int
    events: list[SessionEvent]


class RunDream(msgspec.Struct, frozen=True, tag=True):
    """Run Dream now."""

    request_id: int


class RequestDream(msgspec.Struct, frozen=True, tag=True):
    """Ask the scheduled Dream task to run now."""

    request_id: int


class DreamLog(msgspec.Struct, frozen=True, tag=True):
    """The newest ``limit`` versions of the long-term files."""

    request_id: int
    limit: int


class DreamRestore(msgspec.Struct, frozen=True, tag=True):
    """Bring back version ``target`` of the long-term files (an id or prefix, or steps back) as a new version."""

    request_id: int
    target: str | int


class Refresh(msgspec.Struct, frozen=True, tag=True):
    """Reload the prompt layer (PROJECT MEMORY block + profile) and publish it."""

    request_id: int


LongTermInbox = (
    SaveMemory
    | ForgetMemory
    | MergeRunning
    | RecordChunk
    | EndSession
    | Checkpoint
    | RunDream
    | RequestDream
    | DreamLog
    | DreamRestore
    | Refresh
)


class LongTermDone(msgspec.Struct, frozen=True, tag=True):
    """A request without a value finished."""

    request_id: int


class ToolAnswered(msgspec.Struct, frozen=True, tag=True):
    """A tool call's JSON result text (errors included: the model reads them)."""

    request_id: int
    text: str


class Checkpointed(msgspec.Struct, frozen=True, tag=True):
    """The session summary file written (None: nothing durable to write)."""

    request_id: int
    path: str | None


class Dreamed(msgspec.Struct, frozen=True, tag=True):
    """What a Dream run did."""

    request_id: int
    outcome: DreamOutcome


class DreamRequested(msgspec.Struct, frozen=True, tag=True):
    """False when a Dream run was already requested."""

    request_id: int
    accepted: bool


class Versions(msgspec.Struct, frozen=True, tag=True):
    """Versions of the long-term files, newest first."""

    request_id: int
    versions: list[Version]


class Restored(msgspec.Struct, frozen=True, tag=True):
    """The new version a restore recorded."""

    request_id: int
    version: Version


LongTermOutbox = (
    LongTermDone | ToolAnswered | Checkpointed | Dreamed | DreamRequested | Versions | Restored | Failed
)


class LongTermLayer(msgspec.Struct, frozen=True):
    """The long-term prompt layer as last loaded: PROJECT MEMORY block and profile."""

    sections: tuple[LayerSection, ...] = ()
    """In their order of importance (a prompt short of room keeps the first)."""
    compact: tuple[LayerSection, ...] | None = None
    """The sections of the layer's compact form (:attr:`LongTermText.compact`); None: none."""


R = TypeVar("R")


class LongTermPort:
    """Requests to the long-term actor and its published prompt layer."""

    __slots__ = ("_client", "_layer")

    def __init__(self, client: Client[LongTermInbox, LongTermOutbox], layer: Latest[LongTermLayer]) -> None:
        self._client = client
        self._layer = layer

    @property
    def layer(self) -> LongTermText:
        """The PROJECT MEMORY block and profile as last loaded."""
        layer = self._layer.value
        return LongTermText.of(layer.sections, None if layer.compact is None else LongTermText.of(layer.compact))

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
        await self._ask(lambda rid: EndSession(rid, list(events), reason, summarizer_timeout_s), LongTermDone)

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
