"""A blocking facade over :func:`aiden.open_memory` for synchronous agent loops.

::

    import aiden.sync

    with aiden.sync.open_memory("./agent", model="gpt-4o") as memory:
        memory.begin_run("fix the flaky billing test")
        response = litellm.completion(model="gpt-4o", messages=memory.build_messages().messages)
        memory.record_usage(usage=response.usage)
        memory.commit_run(response.choices[0].message.content or "")

The async runtime (its actors and their task group) runs on a private event-loop
thread started by :func:`anyio.from_thread.start_blocking_portal`; every method of
:class:`SyncMemory` runs the :class:`~aiden.memory.Memory` method of the same name
there and blocks until it returns. Callers own timeouts: nothing here adds one.
A :class:`SyncMemory` may be used from several threads; it must not be used from
inside its own loop thread (e.g. from a summarizer callback).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from aiden.boundary import Classifier
from aiden.config import Config
from aiden.context import PromptBuild, PromptLayers
from aiden.errors import ClosedError
from aiden.events import SessionEvent
from aiden.experience.episodes import Outcome
from aiden.experience.messages import LearnOutcome
from aiden.experience.records import ExperienceRecord
from aiden.lifecycle import RunStart
from aiden.memory import Memory, MemoryStats
from aiden.messages import CompactionOutcome
from aiden.recall.embedding import Embedder
from aiden.recall.types import RecallHit
from aiden.runtime import open_memory as _open_async
from aiden.stores import StoreSpec
from aiden.summarizers.protocol import Summarizer

__all__ = ["SyncMemory", "open_memory"]

_T = TypeVar("_T")


@contextmanager
def open_memory(
    root: str | os.PathLike[str],
    *,
    config: Config | None = None,
    summarizer: Summarizer | None = None,
    model: str | None = None,
    context_window: int | None = None,
    embedder: Embedder | None = None,
    store: StoreSpec | None = None,
    session_id: str | None = None,
) -> Iterator[SyncMemory]:
    """Open the memory under ``root`` on a private event-loop thread; yields a :class:`SyncMemory`.

    The arguments are those of :func:`aiden.open_memory` (``store="postgresql://..."``
    with ``session_id`` selects the PostgreSQL store). Leaving the block (or
    :meth:`SyncMemory.close`) closes the memory exactly as ``async with`` does
    (everything appended is committed), then stops the loop thread.
    """
    with start_blocking_portal(name="aiden-memory-loop") as portal:
        async_cm = _open_async(
            root,
            config=config,
            summarizer=summarizer,
            model=model,
            context_window=context_window,
            embedder=embedder,
            store=store,
            session_id=session_id,
        )
        cm = portal.wrap_async_context_manager(async_cm)
        memory = SyncMemory(portal, cm.__enter__(), cm)
        try:
            yield memory
        finally:
            memory.close()


class SyncMemory:
    """Blocking twin of :class:`~aiden.memory.Memory`; obtain it from :func:`aiden.sync.open_memory`."""

    def __init__(self, portal: BlockingPortal, memory: Memory, cm: AbstractContextManager[Memory]) -> None:
        self._portal = portal
        self._memory = memory
        self._cm = cm
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise ClosedError("memory is closed")

    def _run(self, func: Callable[[], Awaitable[_T]]) -> _T:
        self._check()
        return self._portal.call(func)

    def _run_sync(self, func: Callable[[], _T]) -> _T:
        self._check()
        return self._portal.call(func)

    def call(self, func: Callable[[Memory], Awaitable[_T]]) -> _T:
        """Run ``func(memory)`` on the loop thread and return its result: any other async method.

        Example: ``memory.call(lambda m: m.rehydrate("chunk-id"))``.
        """
        return self._run(partial(func, self._memory))

    def close(self) -> None:
        """Close the memory now (idempotent): commit what was appended, stop the actors."""
        if not self._closed:
            self._closed = True
            self._cm.__exit__(None, None, None)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (or the ``with`` block ended)."""
        return self._closed

    # --- properties ------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The resolved memory root."""
        return self._memory.root

    @property
    def config(self) -> Config:
        """The configuration in force."""
        return self._memory.config

    @property
    def context_window(self) -> int:
        """The context window (tokens) the trigger uses."""
        return self._memory.context_window

    @property
    def run_active(self) -> bool:
        """True between ``begin_run`` and ``commit_run``."""
        return self._memory.run_active

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Every agent tool aiden provides (see :attr:`Memory.tools`)."""
        return self._memory.tools

    @property
    def recall_tool(self) -> dict[str, Any]:
        """The ``recall_session_chunks`` function-tool schema."""
        return self._memory.recall_tool

    # --- appends ---------------------------------------------------------------------

    def append(self, event: SessionEvent) -> SessionEvent:
        """Durably append one event; returns it with its ``seq`` (see :meth:`Memory.append`)."""
        return self._run(partial(self._memory.append, event))

    def append_many(self, events: Iterable[SessionEvent]) -> list[SessionEvent]:
        """Append several events as one unit (see :meth:`Memory.append_many`)."""
        return self._run(partial(self._memory.append_many, list(events)))

    def append_message(self, message: Mapping[str, Any] | object) -> list[SessionEvent]:
        """Append one chat-completions message as its events (see :meth:`Memory.append_message`)."""
        return self._run(partial(self._memory.append_message, message))

    def append_response(self, response: object) -> list[SessionEvent]:
        """Append a chat-completions response's message (see :meth:`Memory.append_response`)."""
        return self._run(partial(self._memory.append_response, response))

    def flush(self) -> None:
        """Wait until everything appended before this call is committed."""
        self._run(self._memory.flush)

    def record_usage(
        self,
        *,
        usage: Mapping[str, Any] | object | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cached_tokens: int | None = None,
        cost_usd: float | None = None,
        tool_output_tokens: int = 0,
        run_ended: bool = False,
        model: str | None = None,
    ) -> None:
        """Report usage of one model call: ``record_usage(usage=response.usage)`` (see :meth:`Memory.record_usage`)."""
        self._run(
            partial(
                self._memory.record_usage,
                usage=usage,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cached_tokens=cached_tokens,
                cost_usd=cost_usd,
                tool_output_tokens=tool_output_tokens,
                run_ended=run_ended,
                model=model,
            )
        )

    # --- runs ------------------------------------------------------------------------

    def begin_run(
        self,
        user_input: str,
        *,
        now: float | None = None,
        new_session: bool | None = None,
        classifier: Classifier | None = None,
        closed_session_id: str | None = None,
        event_id: str | None = None,
        meta: dict[str, Any] | None = None,
        environment: str | None = None,
    ) -> RunStart:
        """Start a run: boundary detection, then the user input (see :meth:`Memory.begin_run`)."""
        return self._run(
            partial(
                self._memory.begin_run,
                user_input,
                now=now,
                new_session=new_session,
                classifier=classifier,
                closed_session_id=closed_session_id,
                event_id=event_id,
                meta=meta,
                environment=environment,
            )
        )

    def commit_run(
        self,
        assistant_output: str,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cached_tokens: int | None = None,
        cost_usd: float | None = None,
        tool_output_tokens: int | None = None,
        model: str | None = None,
        event_id: str | None = None,
        now: float | None = None,
        outcome: Outcome = "unknown",
        outcome_note: str = "",
    ) -> SessionEvent:
        """End a run; schedules maintenance without waiting (see :meth:`Memory.commit_run`)."""
        return self._run(
            partial(
                self._memory.commit_run,
                assistant_output,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cached_tokens=cached_tokens,
                cost_usd=cost_usd,
                tool_output_tokens=tool_output_tokens,
                model=model,
                event_id=event_id,
                now=now,
                outcome=outcome,
                outcome_note=outcome_note,
            )
        )

    def build_messages(
        self,
        layers: PromptLayers | None = None,
        *,
        long_term: str | None = None,
        current_task: str | None = None,
        cache_friendly: bool = True,
        governance: bool = True,
        model: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> PromptBuild:
        """Chat messages for the next model call (see :meth:`Memory.build_messages`)."""
        return self._run(
            partial(
                self._memory.build_messages,
                layers,
                long_term=long_term,
                current_task=current_task,
                cache_friendly=cache_friendly,
                governance=governance,
                model=model,
                tools=tools,
            )
        )

    # --- experience memory -------------------------------------------------------------

    def observe(self, key: str, value: str) -> bool:
        """Record a deterministic observation on the run's episode (see :meth:`Memory.observe`)."""
        return self._run_sync(partial(self._memory.observe, key, value))

    def commit_episode(self, outcome: Outcome = "unknown", note: str = "") -> str | None:
        """Finish and commit the open episode (see :meth:`Memory.commit_episode`)."""
        return self._run(partial(self._memory.commit_episode, outcome, note))

    def learn_experience(self, limit: int = 16) -> LearnOutcome:
        """Learn from committed episodes now (see :meth:`Memory.learn_experience`)."""
        return self._run(partial(self._memory.learn_experience, limit))

    def experience_records(self, environment: str | None = None) -> list[ExperienceRecord]:
        """Every learned record, any status (see :meth:`Memory.experience_records`)."""
        return self._run(partial(self._memory.experience_records, environment))

    def rotate(self, closed_session_id: str | None = None) -> str:
        """Close the active session now; returns the archive id."""
        return self._run(partial(self._memory.rotate, closed_session_id))

    # --- maintenance -----------------------------------------------------------------

    def maintain(self, *, manual: bool = False) -> CompactionOutcome:
        """Run a maintenance pass and wait for it (see :meth:`Memory.maintain`)."""
        return self._run(partial(self._memory.maintain, manual=manual))

    def request_maintenance(self, *, manual: bool = False) -> None:
        """Schedule a maintenance pass without waiting for it."""
        self._run_sync(partial(self._memory.request_maintenance, manual=manual))

    def stats(self) -> MemoryStats:
        """Counters since open (see :meth:`Memory.stats`)."""
        return self._run_sync(self._memory.stats)

    # --- reading and recall ----------------------------------------------------------

    def hot_window(self) -> list[SessionEvent]:
        """The retained hot-window events, in seq order."""
        return self._run(self._memory.hot_window)

    def summary_md(self) -> str:
        """The current summary.md text ("" before the first compaction)."""
        return self._run(self._memory.summary_md)

    def recall_session_chunks(
        self,
        query: str,
        k: int | None = None,
        *,
        types: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[RecallHit]:
        """Search the compacted history of the active session (see :meth:`Memory.recall_session_chunks`)."""
        return self._run(
            partial(
                self._memory.recall_session_chunks,
                query,
                k,
                types=types,
                roles=roles,
                since=since,
                until=until,
            )
        )

    def handle_tool_call(self, name: str, arguments: str | dict[str, Any]) -> str:
        """Run one of :attr:`tools` by name; returns the JSON string for the model."""
        return self._run(partial(self._memory.handle_tool_call, name, arguments))

    def handle_recall_tool(self, arguments: str | dict[str, Any]) -> str:
        """Run a ``recall_session_chunks`` tool call."""
        return self._run(partial(self._memory.handle_recall_tool, arguments))
