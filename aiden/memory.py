"""The public handle: :class:`Memory`, what ``open_memory`` yields.

Callers never touch files or actors directly: appends go to the session
writer, maintenance to the scheduler, reads go straight to the (atomically
replaced) files.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from aiden import errors
from aiden.actors.mailbox import Client, Latest
from aiden.config import Config
from aiden.context import PromptBuild, PromptLayers
from aiden.errors import AidenError, ClosedError, RecallError
from aiden.events import SessionEvent, validate_id
from aiden.intake import prepare_event
from aiden.lifecycle import Lifecycle, RunStart, new_session_id
from aiden.messages import (
    Appended,
    AppendEvents,
    CompactionOutcome,
    ErrorInfo,
    EventsRead,
    Flush,
    Flushed,
    IndexRead,
    Maintain,
    MaintenanceDone,
    ReaderInbox,
    ReaderOutbox,
    ReadEvents,
    ReadFailed,
    ReadHotWindow,
    ReadIndex,
    ReadSummary,
    RecallInbox,
    RecallLookup,
    RecallQuery,
    RecallRehydrate,
    RecallReply,
    RecordUsage,
    Rejected,
    RequestMaintenance,
    Rotated,
    RotateSession,
    SchedulerCounters,
    SchedulerInbox,
    SchedulerOutbox,
    SummaryRead,
    WriterInbox,
    WriterOutbox,
)
from aiden.openai_format import events_from_message, events_from_response, resolve_usage
from aiden.policy.tokens import DEFAULT_PROFILE, TokenProfile, estimate_tokens
from aiden.recall.types import RecallHit, RecallStats
from aiden.storage.chunks import ChunkIndex
from aiden.storage.protocol import RecoveryReport

if TYPE_CHECKING:
    from aiden.longterm.dream import DreamOutcome
    from aiden.longterm.service import LongTermServices

__all__ = ["Memory", "MemoryStats", "dispatch_writer_reply", "raise_error_info"]

_log = logging.getLogger("aiden.memory")

# Seqs are encoded as signed 64-bit ints in messages; a larger one is no seq.
_MAX_SEQ: Final = 2**63 - 1


class MemoryStats(msgspec.Struct, frozen=True, kw_only=True):
    """Telemetry of one open memory (``memory.stats()``)."""

    appends: int
    compactions: int
    passes: int
    coalesced_requests: int
    tokens_before: int
    tokens_after: int
    chunks: int
    summarizer_calls: int
    summarizer_failures: int
    fallbacks: int
    degraded_chunks: int
    conflicts: int
    last_prompt_tokens: int | None
    context_window: int
    token_calibration: float
    resummarized_chunks: int
    deferred_for_cache: int
    cached_share_before_last_compaction: float | None
    cached_share_since_last_compaction: float | None


def _check_text(value: object, name: str) -> None:
    # Checked before encoding: a bad value must be the caller's error, not kill an actor.
    if not isinstance(value, str):
        raise RecallError(f"{name} must be str, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecallError(f"{name} is not valid Unicode: {exc.reason}") from exc


def raise_error_info(info: ErrorInfo) -> AidenError:
    """Rebuild an aiden exception from a reply's :class:`ErrorInfo`."""
    cls = getattr(errors, info.kind, None)
    if isinstance(cls, type) and issubclass(cls, errors.StorageError):
        return cls(info.message, errno=info.errno)
    if isinstance(cls, type) and issubclass(cls, AidenError):
        return cls(info.message)
    return errors.StorageError(info.message, errno=info.errno)


def dispatch_writer_reply(client: Client[WriterInbox, list[int]], message: WriterOutbox) -> None:
    """Route one writer reply to the callers it acknowledges or rejects."""
    match message:
        case Appended(acks=acks):
            for ack in acks:
                client.resolve(ack.request_id, ack.seqs)
        case Rejected(request_ids=ids, error=info):
            for rid in ids:
                client.reject(rid, raise_error_info(info))
        case Flushed(request_id=rid):
            client.resolve(rid, [])


class Memory:
    """An open session memory. Obtain it from :func:`aiden.open_memory`."""

    def __init__(
        self,
        *,
        root: str,
        config: Config,
        context_window: int,
        writer: Client[WriterInbox, list[int]],
        scheduler: Client[SchedulerInbox, SchedulerOutbox],
        scheduler_counters: Latest[SchedulerCounters],
        reader: Client[ReaderInbox, ReaderOutbox],
        recall: Client[RecallInbox, RecallReply],
        recall_stats: Latest[RecallStats | None],
        recovery: RecoveryReport,
        token_profile: TokenProfile = DEFAULT_PROFILE,
        long_term: LongTermServices | None = None,
    ) -> None:
        # Only ports (clients of actor inboxes) and published immutable snapshots:
        # no actor, store or mutable counter of another room is reachable from here.
        self._root = root
        self._config = config
        self._window = context_window
        self._writer = writer
        self._scheduler = scheduler
        self._counters = scheduler_counters
        self._reader = reader
        self._recall_client = recall
        self._recall_stats = recall_stats
        self._runs = Lifecycle(self)
        self._long_term = long_term
        self._appends = 0
        self._profile = token_profile
        self._last_prompt_estimate: int | None = None
        self._turn_tool_tokens = 0
        self._unknown_models: set[str] = set()
        self._coalesced_at_inbox = 0
        self._closed = False
        self.recovery: RecoveryReport = recovery
        """What recovery on open found and did."""

    @property
    def config(self) -> Config:
        """The configuration in force."""
        return self._config

    @property
    def root(self) -> str:
        """The resolved memory root."""
        return self._root

    @property
    def context_window(self) -> int:
        """The context window (tokens) the trigger uses."""
        return self._window

    # --- appends ------------------------------------------------------------------------

    async def append(self, event: SessionEvent) -> SessionEvent:
        """Durably append one event; returns it with its assigned ``seq``.

        When this returns the event is acknowledged: it survives a crash of the
        process at any later instruction (with ``durability: fsync``).
        """
        return (await self.append_many([event]))[0]

    async def append_many(self, events: Iterable[SessionEvent]) -> list[SessionEvent]:
        """Append several events as one unit (one request, consecutive seqs)."""
        self._check_open()
        now = time.time()
        limit = self._config.max_event_bytes
        pairs = [prepare_event(e, now=now, max_event_bytes=limit) for e in events]
        if not pairs:
            return []
        lines = [line for _, line in pairs]
        seqs = await self._writer.call(lambda rid: AppendEvents(rid, lines))
        prepared = [e for e, _ in pairs]
        self._appends += len(prepared)
        for e in prepared:
            if e.type == "tool_result":
                self._turn_tool_tokens += estimate_tokens(e.content, self._profile)
        return [msgspec.structs.replace(e, seq=s) for e, s in zip(prepared, seqs, strict=True)]

    async def append_message(self, message: Mapping[str, Any] | object) -> list[SessionEvent]:
        """Append one chat-completions message (dict or litellm/OpenAI object) as its aiden events.

        An assistant message with ``tool_calls`` gives one ``tool_call`` event per
        call; see :func:`aiden.openai_format.events_from_message` for every role.
        A bad shape raises :class:`InvalidEventError` and appends nothing.
        """
        return await self.append_many(events_from_message(message))

    async def append_response(self, response: object) -> list[SessionEvent]:
        """Append the first choice's message of a chat-completions response (``litellm.ModelResponse`` or dict).

        Usage is not recorded here: call ``record_usage(usage=response.usage)``
        after each model call. For the run's final answer call
        ``commit_run(message.content)`` instead, which ends the run.
        """
        return await self.append_many(events_from_response(response))

    async def flush(self) -> None:
        """Wait until everything appended before this call is committed."""
        self._check_open()
        await self._writer.call(lambda rid: Flush(rid))

    # --- maintenance ---------------------------------------------------------------------

    def request_maintenance(self, *, manual: bool = False) -> None:
        """Schedule a maintenance pass without waiting (coalesced with any pending one)."""
        self._check_open()
        if not self._scheduler.try_cast(RequestMaintenance(manual=manual)):
            self._coalesced_at_inbox += 1

    async def maintain(self, *, manual: bool = False) -> CompactionOutcome:
        """Run a maintenance pass (the seed's Save path) and return what it did.

        ``manual=True`` compacts even when no trigger fires (seed 001's manual trigger).
        """
        self._check_open()
        done = await self._scheduler.call(lambda rid: Maintain(rid, manual))
        assert isinstance(done, MaintenanceDone)
        if done.error is not None:
            raise raise_error_info(done.error)
        assert done.outcome is not None
        return done.outcome

    async def record_usage(
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
        """Report provider usage of one model call (and/or the end of a run) to the trigger.

        The one place for usage: ``await memory.record_usage(usage=response.usage)``
        after each model call, with the OpenAI/litellm usage object or dict as
        returned (prompt, completion and cached prompt tokens are read from it, see
        :func:`aiden.openai_format.usage_numbers`); ``commit_run`` then needs no
        token numbers. ``usage`` and explicit token numbers together are a TypeError.
        """
        self._check_open()
        prompt_tokens, completion_tokens, cached_tokens = resolve_usage(
            usage, prompt_tokens, completion_tokens, cached_tokens
        )
        await self._scheduler.cast(
            RecordUsage(
                prompt_tokens=prompt_tokens,
                estimated_prompt_tokens=self._last_prompt_estimate if prompt_tokens is not None else None,
                completion_tokens=completion_tokens,
                cached_tokens=cached_tokens,
                cost_usd=cost_usd,
                tool_output_tokens=tool_output_tokens,
                run_ended=run_ended,
                model=model,
            )
        )

    def window_for(self, model: str | None) -> int:
        """The context window of ``model`` (litellm's bundled map), else this memory's window.

        An unknown model is logged once, naming the fallback it gets.
        """
        if model is None:
            return self._window
        from aiden.summarizers.llm import ModelResolver

        window = ModelResolver().lookup(model)
        if window is None:
            if model not in self._unknown_models:
                self._unknown_models.add(model)
                _log.warning("unknown model %r: using the configured window of %d tokens", model, self._window)
            return self._window
        return window

    def estimate_text(self, text: str) -> int:
        """aiden's token estimate of ``text`` for this memory's model."""
        return estimate_tokens(text, self._profile)

    def take_turn_tool_tokens(self) -> int:
        """Estimated tokens of tool results appended since the last call (one turn's tool output)."""
        tokens, self._turn_tool_tokens = self._turn_tool_tokens, 0
        return tokens

    def note_prompt_estimate(self, tokens: int) -> None:
        """Remember the estimate of the prompt just built (calibrated against the next reported usage)."""
        self._last_prompt_estimate = tokens

    # --- reading ---------------------------------------------------------------------------

    async def _read(self, build: Any) -> ReaderOutbox:
        reply = await self._reader.call(build)
        if isinstance(reply, ReadFailed):
            raise raise_error_info(reply.error)
        return reply

    async def hot_window(self) -> list[SessionEvent]:
        """The retained hot-window events, in seq order, as stored now."""
        reply = await self._read(lambda rid: ReadHotWindow(rid))
        assert isinstance(reply, EventsRead)
        return reply.events

    async def read_event(self, seq: int) -> SessionEvent | None:
        """The verbatim stored event with ``seq`` (hot window or compacted), None if unknown."""
        self._check_open()
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise RecallError(f"seq must be int, got {type(seq).__name__}")
        if not 0 <= seq <= _MAX_SEQ:
            return None  # no stored event can have it (seqs are positive signed 64-bit)
        found = await self._read_events([seq])
        return found[0] if found else None

    async def chunk_index(self) -> ChunkIndex:
        """The live chunk index (rolling summary and newest chunk entries)."""
        reply = await self._read(lambda rid: ReadIndex(rid))
        assert isinstance(reply, IndexRead)
        return reply.index

    async def summary_md(self) -> str:
        """The current summary.md text ("" before the first compaction)."""
        reply = await self._read(lambda rid: ReadSummary(rid))
        assert isinstance(reply, SummaryRead)
        return reply.text

    def stats(self) -> MemoryStats:
        """Counters since open."""
        s = self._counters.value
        return MemoryStats(
            appends=self._appends,
            compactions=s.compactions,
            passes=s.passes,
            coalesced_requests=s.coalesced_requests + self._coalesced_at_inbox,
            tokens_before=s.tokens_before,
            tokens_after=s.tokens_after,
            chunks=s.compactions,
            summarizer_calls=s.summarizer_calls,
            summarizer_failures=s.summarizer_failures,
            fallbacks=s.fallbacks,
            degraded_chunks=s.degraded_chunks,
            conflicts=s.conflicts,
            last_prompt_tokens=s.last_prompt_tokens,
            context_window=self._window,
            token_calibration=s.token_calibration,
            resummarized_chunks=s.resummarized_chunks,
            deferred_for_cache=s.deferred_for_cache,
            cached_share_before_last_compaction=s.cached_share_before_last_compaction,
            cached_share_since_last_compaction=(
                s.cached_tokens_since_compaction / s.prompt_tokens_since_compaction
                if s.prompt_tokens_since_compaction
                else None
            ),
        )

    # --- runs (delegates to aiden.lifecycle) ------------------------------------------

    async def begin_run(self, user_input: str, **kwargs: Any) -> RunStart:
        """Start a run; see :meth:`aiden.lifecycle.Lifecycle.begin_run`."""
        self._check_open()
        return await self._runs.begin_run(user_input, **kwargs)

    async def commit_run(self, assistant_output: str, **kwargs: Any) -> SessionEvent:
        """End a run; see :meth:`aiden.lifecycle.Lifecycle.commit_run`.

        Usage reported with ``record_usage(usage=...)`` after each call of the run is
        already counted: pass no token numbers here then.
        """
        self._check_open()
        return await self._runs.commit_run(assistant_output, **kwargs)

    async def rotate(self, closed_session_id: str | None = None) -> str:
        """Close the active session now; returns the archive id."""
        self._check_open()
        return await self._rotate(new_session_id(time.time()) if closed_session_id is None else closed_session_id)

    async def _rotate(self, closed_session_id: str) -> str:
        validate_id(closed_session_id, what="session id")
        # Everything appended before the rotation belongs to the closing session.
        await self.flush()
        reply = await self._scheduler.call(lambda rid: RotateSession(rid, closed_session_id))
        assert isinstance(reply, Rotated)
        if reply.error is not None:
            raise raise_error_info(reply.error)
        return reply.archived_id

    async def build_messages(self, layers: PromptLayers | None = None, **kwargs: Any) -> PromptBuild:
        """Chat messages for the next model call; see :meth:`aiden.lifecycle.Lifecycle.build_messages`."""
        self._check_open()
        return await self._runs.build_messages(layers, **kwargs)

    @property
    def run_active(self) -> bool:
        """True between ``begin_run`` and ``commit_run``."""
        return self._runs.run_active

    async def last_activity(self) -> float | None:
        """Timestamp of the newest event of the active session (None when empty)."""
        return await self._runs.last_activity()

    # --- long-term memory ----------------------------------------------------------------

    @property
    def long_term(self) -> LongTermServices:
        """Long-term memory: ``.store`` (save/forget/search), ``.dream``, ``.history``, ``.writer``."""
        if self._long_term is None:
            raise ClosedError("long-term memory is not available")
        return self._long_term

    @property
    def long_term_layer(self) -> str:
        """The PROJECT MEMORY block and profile, as placed in the system prompt."""
        return self._long_term.project_memory if self._long_term is not None else ""

    async def checkpoint(self) -> str:
        """Force a durable session summary now (seed 004's manual checkpoint); returns its path."""
        self._check_open()
        write = await self.long_term.writer.checkpoint(await self.hot_window(), now=time.time())
        await self.long_term.refresh()
        return str(write.path)

    async def dream(self) -> DreamOutcome:
        """Run Dream now: fold new history into SOUL.md / USER.md / MEMORY.md (git-versioned)."""
        self._check_open()
        return await self.long_term.run_dream()

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Every agent tool aiden provides: recall_session_chunks, save_memory, forget_memory."""
        from aiden.longterm.tools import FORGET_MEMORY_TOOL, SAVE_MEMORY_TOOL

        return [self.recall_tool, SAVE_MEMORY_TOOL, FORGET_MEMORY_TOOL]

    async def handle_tool_call(self, name: str, arguments: str | dict[str, Any]) -> str:
        """Run one of :attr:`tools` by name; always returns a JSON string for the model."""
        self._check_open()
        from aiden.longterm.tools import handle_forget_memory, handle_save_memory

        if name == "recall_session_chunks":
            return await self.handle_recall_tool(arguments)
        if name == "save_memory":
            return await handle_save_memory(self.long_term.store, arguments, now=time.time())
        if name == "forget_memory":
            return await handle_forget_memory(self.long_term.store, arguments)
        return json.dumps({"error": f"unknown tool {name!r}"})

    # --- recall -------------------------------------------------------------------------

    async def _recall(self, build: Any) -> RecallReply:
        reply = await self._recall_client.call(build)
        if reply.error is not None:
            raise raise_error_info(reply.error)
        return reply

    async def recall_session_chunks(
        self,
        query: str,
        k: int | None = None,
        *,
        types: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[RecallHit]:
        """The compacted events of the active session best matching ``query`` (BM25 over single events).

        At most ``k`` (capped by ``recall_max_results``) :class:`RecallHit` s,
        best first, whose JSON answer fits ``recall_max_chars``: verbatim event
        texts (cut around the match when needed), chunk summaries only where
        they matched and no event of their chunk did. Sources: ``"active"`` or
        ``"pending"`` (a compaction being committed).
        """
        self._check_open()
        _check_text(query, "query")
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
            raise RecallError(f"k must be a positive int, got {k!r}")
        for name, values in (("types", types), ("roles", roles)):
            if values is not None and (isinstance(values, str) or not all(isinstance(v, str) for v in values)):
                raise RecallError(f"{name} must be a list of str")
        for name, bound in (("since", since), ("until", until)):
            if bound is not None and (not isinstance(bound, int | float) or isinstance(bound, bool)):
                raise RecallError(f"{name} must be a number")
        reply = await self._recall(
            lambda rid: RecallQuery(
                request_id=rid,
                query=query,
                k=k,
                types=list(types) if types is not None else None,
                roles=list(roles) if roles is not None else None,
                since=since,
                until=until,
            )
        )
        return list(reply.hits or [])

    async def lookup_chunk(self, chunk_id: str) -> RecallHit | None:
        """The summary of one chunk by id, as a ``kind == "summary"`` hit (None if unknown)."""
        self._check_open()
        validate_id(chunk_id, what="chunk id")
        reply = await self._recall(lambda rid: RecallLookup(rid, chunk_id))
        return reply.hits[0] if reply.hits else None

    async def rehydrate(self, chunk_id: str, seqs: Sequence[int] | None = None) -> list[SessionEvent]:
        """The verbatim compacted events of ``chunk_id`` (only ``seqs`` if given). The hot window is untouched."""
        self._check_open()
        validate_id(chunk_id, what="chunk id")
        if seqs is not None and (
            isinstance(seqs, str | bytes) or not all(isinstance(q, int) and not isinstance(q, bool) for q in seqs)
        ):
            raise RecallError("seqs must be a list of int")
        if seqs is not None and not all(0 <= q <= _MAX_SEQ for q in seqs):
            raise RecallError(f"seqs must be between 0 and {_MAX_SEQ}")
        reply = await self._recall(
            lambda rid: RecallRehydrate(rid, chunk_id, list(seqs) if seqs is not None else None)
        )
        return list(reply.events or [])

    @property
    def recall_tool(self) -> dict[str, Any]:
        """The ``recall_session_chunks`` function-tool schema for litellm/OpenAI."""
        from aiden.recall.tool import RECALL_TOOL

        return RECALL_TOOL

    async def handle_recall_tool(self, arguments: str | dict[str, Any]) -> str:
        """Run a ``recall_session_chunks`` tool call; bad arguments give a readable error result."""
        from aiden.recall.tool import handle_recall_tool

        return await handle_recall_tool(
            arguments,
            search=self.recall_session_chunks,
            lookup=self.lookup_chunk,
            rehydrate=self.rehydrate,
            max_chars=self._config.recall_max_chars,
            read_events=self._read_events,
        )

    async def _read_events(self, seqs: Sequence[int]) -> list[SessionEvent]:
        self._check_open()
        wanted = [q for q in seqs if 0 <= q <= _MAX_SEQ]
        reply = await self._read(lambda rid: ReadEvents(rid, wanted))
        assert isinstance(reply, EventsRead)
        return reply.events

    def recall_stats(self) -> RecallStats | None:
        """Recall telemetry (calls, results, pending_chunks_recalled); None before the first recall."""
        return self._recall_stats.value

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("memory is closed")


