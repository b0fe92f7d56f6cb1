"""Retried appends through the whole runtime: a known ``event_id`` returns the stored event, on any store.

The event contract (DESIGN section 4): an append whose ``event_id`` is
already stored stores nothing and returns the stored event (its seq,
content, meta and timestamp), not the caller's copy: a client that lost an
ack and retries with a rebuilt event must get what the memory holds. This
holds for hot and compacted events, for repeats within one request and,
for a store that persists, after a reopen. The store side (a hit reported
as ``-seq``, read back by seq) is checked by
:func:`aiden.testing.conformance.check_retry_reads_back_the_stored_event`.
No pytest here: run it from any test runner.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from aiden.events import SessionEvent
from aiden.memory import Memory

__all__ = [
    "OpenMemory",
    "check_a_rotation_ends_the_retry_window",
    "check_retries_return_the_stored_events",
    "original",
    "rebuilt",
]

OpenMemory = Callable[[], AbstractAsyncContextManager[Memory]]
"""Opens the memory under test (the same session each call)."""


def original(i: int) -> SessionEvent:
    """The first attempt of append ``i`` (id ``retry-<i>``)."""
    content = f"original attempt of message {i}. " + "filler words " * 30
    return SessionEvent(
        type="user_input", role="user", content=content, event_id=f"retry-{i}", meta={"try": 1}
    )


def rebuilt(i: int) -> SessionEvent:
    """A retry of append ``i`` by a client that rebuilt the event: same id, other content, meta and timestamp."""
    return SessionEvent(
        type="user_input", role="user", content=f"rebuilt {i}", event_id=f"retry-{i}", meta={"try": 2}
    )


async def check_retries_return_the_stored_events(
    open_memory: OpenMemory, *, count: int, reopen: bool
) -> None:
    """Append ``count`` originals, compact, retry them rebuilt (and again after a reopen when ``reopen``).

    ``open_memory`` must compact some of the originals on ``maintain(manual=True)``.
    """
    async with open_memory() as memory:
        first = await memory.append_many(original(i) for i in range(count))
        assert first == [await memory.read_event(e.seq) for e in first]
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted, outcome
        index = await memory.chunk_index()
        assert first[0].seq <= index.last_seq, "nothing of the originals was compacted"
        await _retry(memory, first, tag="a")
    if reopen:
        async with open_memory() as memory:
            await _retry(memory, first, tag="b")


async def _retry(memory: Memory, first: list[SessionEvent], *, tag: str) -> None:
    again = await memory.append_many(rebuilt(i) for i in range(len(first)))
    assert again == first, "a retry must return the stored events"
    assert await memory.append(rebuilt(len(first) - 1)) == first[-1]
    # One request: a retry, a new event, and that new event repeated (a hit within the request).
    fresh = SessionEvent(
        type="assistant_output", role="assistant", content=f"fresh {tag}", event_id=f"fresh-{tag}"
    )
    repeat = SessionEvent(type="user_input", role="user", content=f"repeat {tag}", event_id=f"fresh-{tag}")
    mixed = await memory.append_many([rebuilt(0), fresh, repeat])
    assert mixed[0] == first[0]
    assert (mixed[1].content, mixed[1].event_id) == (fresh.content, fresh.event_id)
    assert mixed[2] == mixed[1] == await memory.read_event(mixed[1].seq)
    hot = await memory.hot_window()
    assert [e.content for e in hot if e.content.startswith(("rebuilt", "repeat"))] == []


async def check_a_rotation_ends_the_retry_window(open_memory: OpenMemory) -> None:
    """Where the promise ends: an ``event_id`` is stored once per session, and ``rotate()`` starts a new one.

    Before the rotation a retry returns the stored event; after it the same id is a new event of
    the new session (its own seq, its own copy), while the archived session keeps exactly its one
    copy; a retry inside the new session returns that new event again.
    """
    async with open_memory() as memory:
        stored = await memory.append(original(0))
        assert await memory.append(rebuilt(0)) == stored
        await memory.rotate()
        after = await memory.append(rebuilt(0))
        assert (after.content, after.event_id) == (rebuilt(0).content, rebuilt(0).event_id)
        assert await memory.append(original(0)) == after
        hot = await memory.hot_window()
        assert [(e.event_id, e.content) for e in hot] == [(after.event_id, after.content)]
