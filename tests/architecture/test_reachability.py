"""From a running :class:`~aiden.Memory` only ports, mailboxes and immutable snapshots are reachable.

No actor, store, event log, recall index, SQLite connection, task group or
mutable stats object: what crosses from an actor's room into the caller's is a
message or a frozen snapshot.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import msgspec
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden import Config, FileSessionStore, SessionEvent, Storage, open_memory
from aiden.actors.mailbox import Client, Doorbell, Latest
from aiden.context.prompt import IncrementalBody, Renderer
from aiden.experience.episodes import EpisodeRecorder, EpisodeTracker
from aiden.experience.messages import ExperiencePort
from aiden.lifecycle import Lifecycle
from aiden.longterm.messages import LongTermPort
from aiden.memory import Memory
from aiden.messages import Codec
from aiden.ports import ReaderPort, RecallPort, SchedulerPort, WriterPort
from aiden.storage.layout import Layout
from tests.architecture.reach import reachable_types

pytestmark = pytest.mark.anyio

# The caller side of the walls: ports and their plumbing, and Memory's own run state (the
# prompt builder keeps the hot window it rendered for the last prompt).
ALLOWED_OBJECTS: frozenset[type] = frozenset(
    {
        Memory,
        Lifecycle,
        IncrementalBody,
        Renderer,
        WriterPort,
        SchedulerPort,
        ReaderPort,
        RecallPort,
        LongTermPort,
        ExperiencePort,
        EpisodeTracker,
        EpisodeRecorder,
        Client,
        Latest,
        Codec,
        MemoryObjectSendStream,
        # A parked session's doorbell: it rings (a send end) and waits for the answer (a receive end).
        Doorbell,
        MemoryObjectReceiveStream,
        msgspec.msgpack.Encoder,
        msgspec.msgpack.Decoder,
    }
)
# A memory's own back-pressure on its appends (its host's writer serves every memory), and its
# finished episodes sent one task at a time.
ALLOWED_BASES: tuple[type, ...] = (anyio.Semaphore, anyio.Lock)
_BUILTIN_MODULES = {"builtins", "itertools", "pathlib", "posixpath"}


def _frozen_struct(klass: type) -> bool:
    config = getattr(klass, "__struct_config__", None)
    return config is not None and bool(config.frozen)


def offending(types_found: dict[type, list[str]]) -> dict[str, str]:
    """Reachable types that are neither allowed plumbing, plain values nor frozen Structs."""
    bad: dict[str, str] = {}
    for klass, path in types_found.items():
        if (
            klass in ALLOWED_OBJECTS
            or issubclass(klass, ALLOWED_BASES)
            or _frozen_struct(klass)
            or klass.__module__ in _BUILTIN_MODULES
        ):
            continue
        bad[f"{klass.__module__}.{klass.__qualname__}"] = ".".join(path)
    return bad


async def test_only_ports_and_frozen_snapshots_are_reachable_from_memory(tmp_path: Path) -> None:
    async with open_memory(tmp_path / "m") as memory:
        await memory.append_many(
            SessionEvent(type="user_input", role="user", content=f"hello number {i} " * 20) for i in range(40)
        )
        await memory.maintain(manual=True)
        await memory.recall_session_chunks("hello")
        await memory.dream_log()
        memory.stats()
        found = reachable_types(memory)
        assert offending(found) == {}
        # The walk reached the snapshots and plumbing it should (so it did walk).
        names = {klass.__name__ for klass in found}
        assert {"WriterPort", "RecallPort", "LongTermPort", "SchedulerCounters", "Config"} <= names


async def test_the_walk_flags_a_store_a_connection_a_task_group_and_a_mutable_struct(tmp_path: Path) -> None:
    class Stats(msgspec.Struct):
        appended: int = 0

    store = FileSessionStore(Layout(tmp_path / "s"), Storage(), Config())
    connection = sqlite3.connect(":memory:")
    try:
        async with anyio.create_task_group() as tg, open_memory(tmp_path / "m") as memory:
            leaky = Latest(None)
            object.__setattr__(leaky, "_value", [store, connection, tg, Stats()])
            memory.__dict__["_leak"] = leaky
            bad = offending(reachable_types(memory))
            del memory.__dict__["_leak"]
    finally:
        connection.close()
    # The walk goes on into the store (its event log, lock, ...): those are flagged too.
    assert set(bad) >= {
        "aiden.storage.session.FileSessionStore",
        "sqlite3.Connection",
        f"{type(tg).__module__}.{type(tg).__qualname__}",
        f"{__name__}.test_the_walk_flags_a_store_a_connection_a_task_group_and_a_mutable_struct.<locals>.Stats",
    }
    assert bad["sqlite3.Connection"] == "Memory.Latest.list.Connection"
