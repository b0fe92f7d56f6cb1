"""Chunk summaries for a compaction pass: asking the summarizer actor, composing the result.

The scheduler calls this once per pass. It turns a :class:`CompactionPlan`
into the chunk summary (history + split-turn prefix, the must-keep check), the
split-turn context for the hot window, and the fallback breadcrumb when the
summarizer fails and the configuration allows it; :meth:`ChunkSummaries.stage`
wraps that into the chunk entry and next index the store's commit takes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import assert_never

import anyio
import msgspec

from aiden.actors.mailbox import Client
from aiden.config import Config
from aiden.errors import SummarizerError
from aiden.events import SessionEvent
from aiden.messages import Failed, Summarize, Summarized, SummarizerInbox, SummarizerOutbox
from aiden.policy import CompactionPlan
from aiden.policy.tokens import cut_to_tokens, estimate_tokens
from aiden.policy.triggers import (
    ChunkResummarized,
    FellBack,
    MustKeepAdded,
    SummarizerCalled,
    SummarizerFailed,
    TriggerEvent,
)
from aiden.storage.chunks import (
    ChunkEntry,
    ChunkIndex,
    advance_index,
    cap_lines,
    chunk_id_for,
    raw_breadcrumb,
)
from aiden.storage.protocol import SessionStore
from aiden.summarizers.extractive import rolling_fold
from aiden.summarizers.mustkeep import appended_count
from aiden.summarizers.mustkeep.check import with_must_keep
from aiden.summarizers.protocol import Purpose, SummaryRequest, SummaryResult

__all__ = ["SPLIT_TURN_SEPARATOR", "ChunkSummaries", "StagedChunk"]

log = logging.getLogger("aiden.scheduler")

SPLIT_TURN_SEPARATOR = "\n\n---\n\nTurn Context (split turn):\n"


class StagedChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A summarized chunk ready for :meth:`SessionStore.commit`."""

    entry: ChunkEntry
    next_index: ChunkIndex
    pushed_out: list[ChunkEntry]
    """Entries the new one pushed out of Recent Chunks into the rolling summary."""


class ChunkSummaries:
    """The scheduler's side of the summarizer actor.

    ``note`` receives the counter events (calls, failures, fallbacks, repairs):
    the scheduler folds them into its trigger state, which this class never sees.
    """

    def __init__(
        self,
        client: Client[SummarizerInbox, SummarizerOutbox],
        config: Config,
        note: Callable[[TriggerEvent], None],
    ) -> None:
        self._summarizer = client
        self._config = config
        self._note = note

    async def stage(self, plan: CompactionPlan, index: ChunkIndex, *, created_at: float) -> StagedChunk | str:
        """Summarize ``plan`` into the chunk after ``index``; a str is why everything stays unchanged."""
        config = self._config
        previous = index.chunks[-1].summary if index.chunks else index.rolling_summary
        summary, prefix_text, degraded = await self.for_plan(plan, previous)
        if summary is None:
            return prefix_text
        entry = ChunkEntry(
            chunk_id=chunk_id_for(plan.first_seq, plan.last_seq),
            first_seq=plan.first_seq,
            last_seq=plan.last_seq,
            count=len(plan.compacted),
            sha256="",
            summary=summary,
            created_at=created_at,
            kept_seqs=list(plan.kept_seqs),
            degraded=degraded,
            split_turn_context=prefix_text,
            cut_meta=msgspec.to_builtins(plan.cut_meta) or None,
        )
        next_index, pushed, over = advance_index(
            index,
            entry,
            max_chunks=config.summary_max_chunks,
            max_lines=config.max_rolling_summary_lines,
            fold=rolling_fold,
        )
        if over:
            rolling = await self.fold_rolling(next_index.rolling_summary)
            next_index = msgspec.structs.replace(next_index, rolling_summary=rolling)
        return StagedChunk(entry=entry, next_index=next_index, pushed_out=pushed)

    async def for_plan(self, plan: CompactionPlan, previous: str) -> tuple[str | None, str, bool]:
        """(chunk summary, split-turn context, degraded); summary None means leave everything unchanged."""
        config = self._config
        try:
            history = ""
            if plan.history:
                hot = (*plan.kept, *plan.retained)
                history = (await self.summarize("history", plan.history, previous, hot_window=hot)).text
            prefix = ""
            if plan.turn_prefix:
                prefix = (await self.summarize("turn_prefix", plan.turn_prefix, history or previous)).text
        except SummarizerError as exc:
            if config.failure_fallback == "none":
                return None, str(exc), False
            self._note(FellBack())
            crumb = raw_breadcrumb(
                [e.content for e in plan.compacted],
                first_seq=plan.first_seq,
                last_seq=plan.last_seq,
                max_chars=min(config.breadcrumb_max_chars, config.summary_max_chars),
            )
            return crumb, "", True
        if history and prefix:
            # The chunk's summary as stored is what summary_max_tokens bounds: share it.
            budget = self._config.chunk_summary_tokens()
            prefix = cut_to_tokens(prefix, max(1, budget // 3), estimate_tokens)
            history = cut_to_tokens(history, max(1, budget - estimate_tokens(prefix)), estimate_tokens)
        summary = history + SPLIT_TURN_SEPARATOR + prefix if (history and prefix) else (history or prefix)
        summary = await self._with_must_keep(summary, plan.compacted)
        # summary_max_chars bounds what is stored: the must-keep facts and the split turn were added
        # after the summarizer's output was checked against it. A line-boundary cut is the backstop.
        return cut_to_tokens(summary, config.summary_max_chars, len), prefix, False

    async def _with_must_keep(self, summary: str, events: Sequence[SessionEvent]) -> str:
        """``summary`` with the must-keep facts of ``events`` it lacks appended (counted in the stats)."""
        after = await with_must_keep(summary, events, self._config.must_keep_max_items)
        added = appended_count(summary, after)
        if added:
            self._note(MustKeepAdded(added))
        return after

    async def summarize(
        self,
        purpose: Purpose,
        events: Sequence[SessionEvent],
        previous: str,
        *,
        hot_window: Sequence[SessionEvent] = (),
    ) -> SummaryResult:
        """One summarizer call through the actor; a failure raises :class:`SummarizerError`."""
        self._note(SummarizerCalled())
        request = SummaryRequest(
            purpose=purpose,
            events=tuple(events),
            previous_summary=previous,
            max_tokens=self._config.chunk_summary_tokens(),
            hot_window=tuple(hot_window),
        )
        reply = await self._summarizer.call(lambda rid: Summarize(rid, request))
        match reply:
            case Summarized(result=result):
                # summary_max_tokens is enforced, never by rejecting the compaction: cut at a sentence.
                budget = self._config.chunk_summary_tokens()
                text = cut_to_tokens(result.text, budget, estimate_tokens)
                return result if text == result.text else msgspec.structs.replace(result, text=text)
            case Failed(error=err):
                self._note(SummarizerFailed(f"{err.kind}: {err.message}"))
                raise SummarizerError(f"{err.kind}: {err.message}")
            case _:
                assert_never(reply)

    async def fold_rolling(self, rolling: str) -> str:
        """Fold an overflowing rolling summary into a checkpoint; the line cap stays the backstop."""
        cap = self._config.max_rolling_summary_lines
        self._note(SummarizerCalled())
        request = SummaryRequest(
            purpose="rolling_fold", text=rolling, max_tokens=self._config.chunk_summary_tokens()
        )
        reply = await self._summarizer.call(lambda rid: Summarize(rid, request))
        if isinstance(reply, Summarized):
            return cap_lines(reply.result.text, max_lines=cap, keep_head=True)
        self._note(SummarizerFailed(f"{reply.error.kind}: {reply.error.message}"))
        return cap_lines(rolling, max_lines=cap)

    async def repair_degraded(self, store: SessionStore, live: Sequence[ChunkEntry]) -> None:
        """Re-summarize one degraded (breadcrumb) chunk per quiet pass, once the summarizer works again."""
        entry = next((e for e in live if e.degraded), None)
        if entry is None:
            return
        chunk = await anyio.to_thread.run_sync(store.read_chunk, entry.chunk_id)
        try:
            result = await self.summarize("history", chunk.events, "")
        except SummarizerError:
            return  # still degraded; try again on a later pass
        summary = await self._with_must_keep(result.text, chunk.events)
        if await anyio.to_thread.run_sync(store.replace_summary, entry.chunk_id, summary):
            self._note(ChunkResummarized())
            log.info("re-summarized degraded chunk %s", entry.chunk_id)
