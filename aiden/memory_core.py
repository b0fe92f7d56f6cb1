"""The core of the public handle: :class:`CoreMemory`, what :class:`~aiden.memory.Memory` adds extensions to.

A memory holds one typed port per actor (:mod:`aiden.ports`) and the immutable snapshots
actors publish, never files or actors. The core names no extension: long-term and experience
memory subclass it and take part in a run through the hooks at the end, which do nothing here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, get_args

from aiden.actors.mailbox import Latest
from aiden.config import Config
from aiden.context.prompt import PromptBuild, PromptLayers
from aiden.errors import AidenError, ClosedError, InvalidEventError
from aiden.events import SessionEvent, validate_id
from aiden.intake import as_stored, check_text, prepare_event
from aiden.lifecycle import Lifecycle, Outcome, RunStart, new_session_id
from aiden.messages import CompactionOutcome, RecordUsage
from aiden.observe import MemoryStats, memory_stats, observed
from aiden.openai_format import events_from_message, events_from_response, resolve_usage
from aiden.policy.tokens import DEFAULT_PROFILE, BudgetCalibration, TokenProfile, estimate_tokens, observe
from aiden.policy.triggers import BoundaryDecision, Classifier, decide_boundary
from aiden.ports import ReaderPort, RecallPort, SchedulerPort, WriterPort
from aiden.recall.tool import RECALL_TOOL, RecallHit, RecallStats, RecallTools
from aiden.storage.chunks import ChunkIndex
from aiden.storage.protocol import PreparedEvent, RecoveryReport
from aiden.tools import ToolSet, agent_tools, run_tool_call

__all__ = ["CoreMemory"]

# Texts whose estimates Memory.estimate_text remembers: long enough to be worth it, at most this many.
_LAST_SECOND = 253402300799  # 9999-12-31T23:59:59Z: a closed session's id is dated with ``now``
_CACHED_CHARS = 64
_CACHED_TEXTS = 32768


class CoreMemory:
    """An open memory without extensions; :class:`~aiden.memory.Memory` is the one users get."""

    def __init__(
        self,
        *,
        root: str,
        config: Config,
        context_window: int,
        writer: WriterPort,
        scheduler: SchedulerPort,
        reader: ReaderPort,
        recall: RecallPort,
        recovery: RecoveryReport,
        calibration: Latest[BudgetCalibration],
        closed: Callable[[], bool],
        token_profile: TokenProfile = DEFAULT_PROFILE,
    ) -> None:
        """Built by the runtime: ``calibration`` holds what the last close of this root kept, and
        the memory publishes there each calibration reported usage teaches it (the runtime saves the
        newest at close); ``closed`` tells whether the runtime has closed the memory."""
        self._root = root
        self._config = config
        self._window = context_window
        self._writer = writer
        self._scheduler = scheduler
        self._reader = reader
        self._recall = recall
        self._runs = Lifecycle(self, context_window)
        self._runs.calibration = calibration.value
        self._learned = calibration
        self._run_open = False
        self._turn_tool_tokens = 0  # the tool-output spike trigger's input (seed 001)
        self._appends = 0
        self._last_append_at: float | None = None
        self._profile = token_profile
        self._estimates: dict[str, int] = {}
        self._closed = closed
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
        """Durably append one event; returns it as stored, with its assigned ``seq``.

        When this returns the event is acknowledged: it survives a crash of the
        process at any later instruction (with ``durability: fsync``). An
        ``event_id`` already stored is not stored again: the stored event is returned.
        """
        return (await self.append_many([event]))[0]

    async def append_many(self, events: Iterable[SessionEvent]) -> list[SessionEvent]:
        """Append several events as one unit (one request, consecutive seqs)."""
        self._check_open()
        now = time.time()
        limit = self._config.max_event_bytes
        if not isinstance(events, Iterable):
            raise InvalidEventError(f"events must be an iterable of SessionEvent, got {type(events).__name__}")
        return await self._append_prepared([prepare_event(e, now=now, max_event_bytes=limit) for e in events])

    async def _append_prepared(self, pairs: list[tuple[SessionEvent, PreparedEvent]]) -> list[SessionEvent]:
        if not pairs:
            return []
        seqs = await self._writer.append([line for _, line in pairs])
        prepared = [e for e, _ in pairs]
        self._appends += len(prepared)
        newest = max((e.timestamp for e in prepared if e.timestamp is not None), default=None)
        if newest is not None and (self._last_append_at is None or newest > self._last_append_at):
            self._last_append_at = newest
        for e in prepared:
            if e.type == "tool_result":
                self._turn_tool_tokens += estimate_tokens(e.content, self._profile)
            elif e.type == "user_input":
                # A new turn (begin_run's or an append-only agent's): its over-budget prompt may
                # compact synchronously again, whatever happened in the turn before.
                self._runs.sync_compaction_failed = False
        # A known event_id returns what is stored (a retry's content may differ): read back only then.
        found = await self._reader.events([-s for s in seqs if s < 0]) if min(seqs) < 0 else ()
        stored = as_stored(prepared, seqs, found)
        self._appended(stored)
        return stored

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
        await self._writer.flush()

    # --- maintenance ---------------------------------------------------------------------

    def request_maintenance(self, *, manual: bool = False) -> None:
        """Schedule a maintenance pass without waiting (coalesced with any pending one)."""
        self._check_open()
        self._scheduler.request(manual=manual)

    async def maintain(self, *, manual: bool = False) -> CompactionOutcome:
        """Run a maintenance pass (the seed's Save path) and return what it did.

        ``manual=True`` compacts even when no trigger fires (seed 001's manual trigger).
        """
        self._check_open()
        return await self._scheduler.maintain(manual=manual)

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
        # The estimate of the prompt built last goes with the first report after it: paired with the
        # provider's figure it calibrates the estimator; alone it is the prompt size the trigger uses.
        estimate = self._runs.last_prompt_estimate
        usage = RecordUsage(
            prompt_tokens=prompt_tokens,
            estimated_prompt_tokens=estimate,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            cost_usd=cost_usd,
            tool_output_tokens=tool_output_tokens,
            run_ended=run_ended,
            model=model,
        )
        self._scheduler.check_usage(usage)  # a refused report changes nothing
        self._runs.last_prompt_estimate = None
        if estimate is not None and prompt_tokens is not None:
            self._runs.calibration = observe(
                self._runs.calibration,
                estimated=estimate,
                reported=prompt_tokens,
                weight=self._config.token_calibration_weight,
            )
            self._learned.publish(self._runs.calibration)
        await self._scheduler.record_usage(usage)

    def estimate_text(self, text: str) -> int:
        """aiden's token estimate of ``text`` for this memory's model."""
        # Each prompt re-reads the whole hot window: its events' estimates are remembered (a
        # lookup is far cheaper than estimating), so a prompt estimates its new events only.
        if not isinstance(text, str):
            raise AidenError(f"text must be str, got {type(text).__name__}")
        known = self._estimates.get(text)
        if known is not None:
            return known
        tokens = estimate_tokens(text, self._profile)
        if len(text) >= _CACHED_CHARS:
            if len(self._estimates) >= _CACHED_TEXTS:
                del self._estimates[next(iter(self._estimates))]  # the oldest first
            self._estimates[text] = tokens
        return tokens

    # --- reading ---------------------------------------------------------------------------

    async def hot_window(self) -> list[SessionEvent]:
        """The retained hot-window events, in seq order, as stored now."""
        return await self._reader.hot_window()

    async def read_event(self, seq: int) -> SessionEvent | None:
        """The verbatim stored event with ``seq`` (hot window or compacted), None if unknown."""
        self._check_open()
        return await self._reader.event(seq)

    async def read_events(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The verbatim stored events with these seqs (hot window or compacted), in seq order; unknown ones left out.

        :class:`~aiden.errors.RecallError` when ``seqs`` is not a list of ints.
        """
        self._check_open()
        return await self._reader.events(seqs)

    async def chunk_index(self) -> ChunkIndex:
        """The live chunk index (rolling summary and newest chunk entries)."""
        return await self._reader.index()

    async def summary_md(self) -> str:
        """The current summary.md text ("" before the first compaction)."""
        return await self._reader.summary()

    def stats(self) -> MemoryStats:
        """Counters since open."""
        return memory_stats(
            self._scheduler.counters,
            appends=self._appends,
            coalesced_at_inbox=self._scheduler.coalesced_at_inbox,
            context_window=self._window,
            episodes_quarantined=self._set_aside(),
            last_append_at=self._last_append_at,
        )

    # --- recall -------------------------------------------------------------------------

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
        return await self._recall.search(query, k, types=types, roles=roles, since=since, until=until)

    async def lookup_chunk(self, chunk_id: str) -> RecallHit | None:
        """The summary of one chunk by id, as a ``kind == "summary"`` hit (None if unknown)."""
        self._check_open()
        return await self._recall.lookup(chunk_id)

    async def rehydrate(self, chunk_id: str, seqs: Sequence[int] | None = None) -> list[SessionEvent]:
        """The verbatim compacted events of ``chunk_id`` (only ``seqs`` if given). The hot window is untouched."""
        self._check_open()
        return await self._recall.rehydrate(chunk_id, seqs)

    @property
    def recall_tool(self) -> dict[str, Any]:
        """The ``recall_session_chunks`` function-tool schema for litellm/OpenAI."""
        return RECALL_TOOL

    async def handle_recall_tool(self, arguments: str | dict[str, Any]) -> str:
        """Run a ``recall_session_chunks`` tool call; bad arguments give a readable error result."""
        self._check_open()
        return await self._recall_tools().run("recall_session_chunks", arguments)

    def _recall_tools(self) -> RecallTools:
        return RecallTools(
            search=self._recall.search,
            lookup=self._recall.lookup,
            rehydrate=self._recall.rehydrate,
            max_chars=self._config.recall_max_chars,
            read_events=self._reader.events,
        )

    def recall_stats(self) -> RecallStats | None:
        """Recall telemetry (calls, results, pending_chunks_recalled); None before the first recall."""
        return self._recall.stats

    # --- runs (the prompt is built by aiden.lifecycle) -----------------------------------

    async def begin_run(
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
        """Start a run: rotate the session if this turn starts a new one, then append the user input.

        A retry (an ``event_id`` the hot window holds) returns the stored input and rotates nothing.

        With ``config.experience`` (default) the run is also recorded as an
        episode of ``environment`` (default ``config.experience_environment``).
        """
        self._check_open()
        now = time.time() if now is None else now
        if not (isinstance(now, int | float) and not isinstance(now, bool) and 0 <= now <= _LAST_SECOND):
            raise InvalidEventError(f"now must be seconds since the epoch, up to the year 9999; got {now!r}")
        if environment is not None:
            check_text("environment", environment)
            # A label every store keys on (a database's text column refuses a NUL).
            if len(environment) > 200 or "\x00" in environment:
                raise InvalidEventError("environment must be at most 200 characters, with no NUL")
        event = SessionEvent(
            type="user_input", role="user", content=user_input, timestamp=now, event_id=event_id, meta=meta or {}
        )
        # Prepared (and so refused, if bad) before the turn can rotate the session: a bad input changes nothing.
        prepared = prepare_event(event, now=now, max_event_bytes=self._config.max_event_bytes)
        hot = await self.hot_window()
        last = await self._last_activity(hot)
        if event_id is not None and any(e.event_id == event_id for e in hot):
            # A retry of this call (its answer lost, or the agent restarted before answering): its input
            # is in this session already. Rotating first would archive it and store it again in a new
            # session; the append below returns the stored event instead.
            decision = BoundaryDecision(new_session=False, reason="default_continue")
        else:
            decision = decide_boundary(
                user_input=user_input,
                now=now,
                last_activity=last,
                config=self._config,
                explicit_new=new_session,
                classifier=classifier,
            )
        archived: str | None = None
        if decision.new_session and last is not None:
            archived = await self.rotate(closed_session_id or new_session_id(now))
        elif (
            last is not None
            and self._config.idle_gap_compact_minutes > 0
            and now - last >= self._config.idle_gap_compact_minutes * 60
        ):
            # Seed 001's idle-gap trigger: compact while the user waits for the first answer anyway.
            self.request_maintenance(manual=True)
        self._check_open()  # as append() would: the awaits above may have seen the memory close
        (stored,) = await self._append_prepared([prepared])
        self._run_open = True
        await self._run_began(stored, environment)
        return RunStart(user_event=stored, decision=decision, archived_session_id=archived)

    async def commit_run(
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
        """End a run: append the output, report the run's largest prompt, request maintenance (no wait).

        Usage reported with ``record_usage(usage=...)`` after each call of the run is
        already counted: pass no token numbers here then. ``outcome`` and
        ``outcome_note`` finish the run's episode (:meth:`commit_episode`).
        """
        self._check_open()
        # Everything refusable is refused before the run's output is appended: a refused commit changes nothing.
        check_text("outcome_note", outcome_note)
        if outcome not in get_args(Outcome):
            raise InvalidEventError(f"outcome must be one of {get_args(Outcome)}, got {outcome!r}")
        self._scheduler.check_usage(
            RecordUsage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cached_tokens=cached_tokens,
                cost_usd=cost_usd,
                tool_output_tokens=0 if tool_output_tokens is None else tool_output_tokens,
                model=model,
            )
        )
        stored = await self.append(
            SessionEvent(
                type="assistant_output", role="assistant", content=assistant_output, event_id=event_id, timestamp=now
            )
        )
        if tool_output_tokens is None:
            # The tool-output spike trigger (seed 001) counts this turn's tool results.
            tool_output_tokens, self._turn_tool_tokens = self._turn_tool_tokens, 0
        await self.record_usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            cost_usd=cost_usd,
            tool_output_tokens=tool_output_tokens,
            run_ended=True,
            model=model,
        )
        self._run_open = False
        self.request_maintenance()
        await self._run_ended(outcome, outcome_note)
        return stored

    async def rotate(self, closed_session_id: str | None = None) -> str:
        """Close the active session now (as ``closed_session_id``, else a fresh id); returns the archive id."""
        self._check_open()
        closed_session_id = new_session_id(time.time()) if closed_session_id is None else closed_session_id
        validate_id(closed_session_id, what="session id")
        # Everything appended before the rotation belongs to the closing session.
        await self.flush()
        return await self._scheduler.rotate(closed_session_id)

    @observed("build_messages")
    async def build_messages(
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
        """The chat messages for the next model call: system layers, summary, hot window.

        With ``governance`` (the default) old or oversized tool results are
        replaced in this prompt only by stubs naming the seq to rehydrate them.
        ``tools``: the tool schemas the call will send (chat-completions format, e.g.
        ``[*my_tools, *memory.tools]``); they count in the budget as the provider counts them.
        ``model``: the model this call goes to, whose window bounds this prompt; explicit token
        sizes that do not fit that window are clamped for this call (the reserve to half of it).
        ``long_term``: the long-term layer instead of :attr:`long_term_layer`; that property passed
        back switches to its smaller PROJECT MEMORY block as the default does, other text is used as is.
        """
        self._check_open()
        _check_prompt_inputs(layers, {"long_term": long_term, "current_task": current_task, "model": model}, tools)
        return await self._runs.build_messages(
            layers, long_term, current_task, cache_friendly, governance, model, tools
        )

    @property
    def run_active(self) -> bool:
        """True between ``begin_run`` and ``commit_run``."""
        return self._run_open

    async def last_activity(self) -> float | None:
        """Timestamp of the newest event of the active session (None when empty)."""
        return await self._last_activity(await self.hot_window())

    async def _last_activity(self, hot: list[SessionEvent]) -> float | None:
        if hot:
            return max((e.timestamp or 0.0) for e in hot)
        index = await self.chunk_index()
        return index.chunks[-1].created_at if index.chunks else None

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Every agent tool aiden provides: recall_session_chunks, save_memory, forget_memory, recall_experience."""
        return agent_tools(self._tool_sets())

    async def handle_tool_call(self, name: str, arguments: str | dict[str, Any]) -> str:
        """Run one of :attr:`tools` by name; always returns a JSON string for the model."""
        self._check_open()
        return await run_tool_call(name, arguments, self._tool_sets())

    # --- the extensions' hooks (a subclass extends each with super()) ---------------------

    @property
    def long_term_layer(self) -> str:
        """The PROJECT MEMORY block and profile, as placed in the system prompt ("" without long-term memory)."""
        return ""

    def _tool_sets(self) -> list[ToolSet]:
        """The agent tools, in the order the agent is shown them: recall's, then the extensions'."""
        return [self._recall_tools()]

    def _appended(self, events: list[SessionEvent]) -> None:
        """``events`` were acknowledged (as stored)."""

    async def _run_began(self, root: SessionEvent, environment: str | None) -> None:
        """A run began with its root input ``root`` (``environment`` as ``begin_run`` got it)."""

    async def _run_ended(self, outcome: Outcome, note: str) -> None:
        """The run ended, with the caller's ``outcome`` and ``note``."""

    def _set_aside(self) -> int:
        """Episodes that could not be committed and were dropped (:attr:`MemoryStats.episodes_quarantined`)."""
        return 0

    def _check_open(self) -> None:
        if self._closed():
            raise ClosedError("memory is closed")


def _check_prompt_inputs(
    layers: PromptLayers | None, texts: dict[str, str | None], tools: Sequence[Mapping[str, Any]]
) -> None:
    """Refuse what would otherwise fail deep in the prompt assembly (or reach the model as garbage)."""
    if layers is not None:
        if not isinstance(layers, PromptLayers):
            raise AidenError(f"layers must be PromptLayers or None, got {type(layers).__name__}")
        texts = {**texts, **{f"layers.{f}": getattr(layers, f) for f in PromptLayers.__struct_fields__}}
    for name, value in texts.items():
        if value is not None:
            check_text(name, value, AidenError)
    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence) or not all(isinstance(t, Mapping) for t in tools):
        raise AidenError("tools must be a sequence of tool schemas (mappings)")

