"""The recall half of :class:`~aiden.memory.Memory`: search, lookup, rehydrate, the recall tool.

A base class of ``Memory`` so the public facade stays one object while each
file keeps one job; it only forwards to the recall and reader ports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiden.config import Config
from aiden.events import SessionEvent
from aiden.ports import ReaderPort, RecallPort
from aiden.recall.types import RecallHit, RecallStats
from aiden.tools import run_recall_tool

__all__ = ["RecallMethods"]


class RecallMethods:
    """Recall operations of an open memory (mixed into :class:`~aiden.memory.Memory`)."""

    _recall: RecallPort
    _reader: ReaderPort
    _config: Config

    def _check_open(self) -> None:
        raise NotImplementedError  # Memory defines it

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
        from aiden.recall.tool import RECALL_TOOL

        return RECALL_TOOL

    async def handle_recall_tool(self, arguments: str | dict[str, Any]) -> str:
        """Run a ``recall_session_chunks`` tool call; bad arguments give a readable error result."""
        self._check_open()
        return await run_recall_tool(
            arguments, recall=self._recall, reader=self._reader, max_chars=self._config.recall_max_chars
        )

    def recall_stats(self) -> RecallStats | None:
        """Recall telemetry (calls, results, pending_chunks_recalled); None before the first recall."""
        return self._recall.stats
