"""Chunk summaries for a compaction pass: asking the summarizer actor, composing the result.

The scheduler calls this once per pass. It turns a :class:`CompactionPlan`
into the chunk summary (history + split-turn prefix, the must-keep check), the
split-turn context for the hot window, and the fallback breadcrumb when the
summarizer fails and the configuration allows it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, assert_never

import anyio
import msgspec

from aiden.actors.mailbox import Client
from aiden.config import Config
from aiden.errors import SummarizerError
from aiden.events import SessionEvent
from aiden.messages import Summarize, Summarized, SummarizeFailed, SummarizerInbox, SummarizerOutbox
from aiden.policy import CompactionPlan
from aiden.policy.textbudget import cut_to_tokens
from aiden.policy.tokens import estimate_tokens
from aiden.storage.chunks import ChunkEntry
from aiden.storage.protocol import SessionStore
from aiden.storage.summary_md import cap_lines, raw_breadcrumb
from aiden.summarizers.protocol import Purpose, SummaryRequest, SummaryResult

if TYPE_CHECKING:
    from aiden.actors.scheduler import SchedulerStats

__all__ = ["SPLIT_TURN_SEPARATOR", "ChunkSummaries"]

log = logging.getLogger("aiden.scheduler")

SPLIT_TURN_SEPARATOR = "\n\n---\n\nTurn Context (split turn):\n"


class ChunkSummaries:
    """The scheduler's side of the summarizer actor."""

    def __init__(
        self,
        client: Client[SummarizerInbox, SummarizerOutbox],
        config: Config,
        stats: SchedulerStats,
    ) -> None:
        self._summarizer = client
        self._config = config
        self.stats = stats

    async def for_plan(self, plan: CompactionPlan, previous: str) -> tuple[str | None, str, bool]:
        """(chunk summary, split-turn context, degraded); summary None means leave everything unchanged."""
        config = self._config
        try:
            history = ""
            if plan.history:
                history = (await self.summarize("history", plan.history, previous)).text
            prefix = ""
            if plan.turn_prefix:
                prefix = (await self.summarize("turn_prefix", plan.turn_prefix, history or previous)).text
        except SummarizerError as exc:
            if config.failure_fallback == "none":
                return None, str(exc), False
            self.stats.fallbacks += 1
            crumb = raw_breadcrumb(
                [e.content for e in plan.compacted],
                first_seq=plan.first_seq,
                last_seq=plan.last_seq,
                max_chars=config.breadcrumb_max_chars,
            )
            return crumb, "", True
        if history and prefix:
            # The chunk's summary as stored is what summary_max_tokens bounds: share it.
            budget = self._config.chunk_summary_tokens()
            prefix = cut_to_tokens(prefix, max(1, budget // 3), estimate_tokens)
            history = cut_to_tokens(history, max(1, budget - estimate_tokens(prefix)), estimate_tokens)
        summary = history + SPLIT_TURN_SEPARATOR + prefix if (history and prefix) else (history or prefix)
        # Inline, not in a worker thread: see the note on planning in scheduler.py.
        return self._with_must_keep(summary, plan.compacted), prefix, False

    def _with_must_keep(self, summary: str, events: Sequence[SessionEvent]) -> str:
        from aiden.summarizers.mustkeep import apply_must_keep, extract_must_keep

        limit = self._config.must_keep_max_items
        return apply_must_keep(summary, extract_must_keep(events, max_items=limit), max_items=limit)

    async def summarize(self, purpose: Purpose, events: Sequence[SessionEvent], previous: str) -> SummaryResult:
        """One summarizer call through the actor; a failure raises :class:`SummarizerError`."""
        self.stats.summarizer_calls += 1
        request = SummaryRequest(
            purpose=purpose,
            events=tuple(events),
            previous_summary=previous,
            max_tokens=self._config.chunk_summary_tokens(),
        )
        reply = await self._summarizer.call(lambda rid: Summarize(rid, request))
        match reply:
            case Summarized(result=result):
                # summary_max_tokens is enforced, never by rejecting the compaction: cut at a sentence.
                budget = self._config.chunk_summary_tokens()
                text = cut_to_tokens(result.text, budget, estimate_tokens)
                return result if text == result.text else msgspec.structs.replace(result, text=text)
            case SummarizeFailed(error=err):
                self.stats.summarizer_failures += 1
                raise SummarizerError(f"{err.kind}: {err.message}")
            case _:
                assert_never(reply)

    async def fold_rolling(self, rolling: str) -> str:
        """Fold an overflowing rolling summary into a checkpoint; the line cap stays the backstop."""
        cap = self._config.max_rolling_summary_lines
        self.stats.summarizer_calls += 1
        request = SummaryRequest(purpose="rolling_fold", text=rolling, max_tokens=self._config.chunk_summary_tokens())
        reply = await self._summarizer.call(lambda rid: Summarize(rid, request))
        if isinstance(reply, Summarized):
            return cap_lines(reply.result.text, max_lines=cap, keep_head=True)
        self.stats.summarizer_failures += 1
        return cap_lines(rolling, max_lines=cap)

    async def repair_degraded(self, store: SessionStore, live: Sequence[ChunkEntry]) -> None:
        """Re-summarize one degraded (breadcrumb) chunk per quiet pass, once the summarizer works again."""
        entry = next((e for e in live if e.degraded), None)
        if entry is None:
            return
        chunk = await anyio.to_thread.run_sync(
            store.read_chunk, entry.chunk_id
        )
        try:
            result = await self.summarize("history", chunk.events, "")
        except SummarizerError:
            return  # still degraded; try again on a later pass
        summary = self._with_must_keep(result.text, chunk.events)
        if await anyio.to_thread.run_sync(store.replace_summary, entry.chunk_id, summary):
            self.stats.degraded_chunks = max(0, self.stats.degraded_chunks - 1)
            self.stats.resummarized_chunks += 1
            log.info("re-summarized degraded chunk %s", entry.chunk_id)
