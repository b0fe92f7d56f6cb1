"""Writing durable summaries at the moments that matter (seed 004, step 2).

* :meth:`SessionSummaryWriter.merge_running_summary` — before every
  compaction: the about-to-be-compacted events are extracted and merged into
  ``session/running_summary.md``, so compaction never destroys knowledge that
  was not exported yet.
* :meth:`SessionSummaryWriter.write_session_summary` — at session end
  (completion, cancellation, rotation): the running summary merged with the
  extraction of the remaining hot window, written to
  ``long_term/sessions/<YYYYMMDDTHHMMSSZ>-<session_id>.md``; then the store cap
  is enforced (oldest summaries into the digest).
* :meth:`SessionSummaryWriter.checkpoint` — the manual command: the same, mid-session.

A session keeps one dated file: its id lives in the running summary, and a
later checkpoint or the session end rewrites the same file. Extraction goes
through the :class:`~aiden.summarizers.protocol.Summarizer` protocol
(``purpose="session_summary"``) under ``config.summarizer_timeout_s``; if the
summarizer fails, the deterministic :class:`ExtractiveSummarizer` is used so
knowledge is never dropped because a provider is down. Every write is atomic.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Final

import anyio
import msgspec

from aiden.config import Config
from aiden.errors import SummarizerError
from aiden.events import SessionEvent
from aiden.longterm.cap import CapResult, enforce_cap
from aiden.longterm.files import (
    SESSION_FILE,
    list_session_files,
    read_summary,
    running_summary_path,
    session_file_name,
    write_summary,
)
from aiden.longterm.merge import DEFAULT_MAX_ITEMS, merge_summaries
from aiden.longterm.summaries import SessionSummary, summary_from_result
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.summarizers.protocol import DeadlineOwner, Summarizer, SummaryRequest

__all__ = [
    "SUMMARIES_LOCK_NAME",
    "SessionSummaryWriter",
    "SummaryWrite",
    "extract_summary",
    "merged_running",
    "session_ending",
]

SUMMARIES_LOCK_NAME: Final = ".summaries.lock"
"""``long_term/.summaries.lock``: held around each running-summary merge and session-file write."""

log = logging.getLogger("aiden.longterm")


class SummaryWrite(msgspec.Struct, frozen=True, kw_only=True):
    """What a session-end write or checkpoint did."""

    path: str | None
    """The dated summary file written (``None``: nothing durable to write)."""
    summary: SessionSummary
    reason: str
    degraded: bool = False
    """True when the summarizer failed and the extractive fallback was used."""
    cap: CapResult = CapResult()


def _new_session_id() -> str:
    return secrets.token_hex(4)


async def extract_summary(
    summarizer: Summarizer,
    config: Config,
    events: Sequence[SessionEvent],
    *,
    use_fallback: bool = True,
    summarizer_timeout_s: float | None = None,
) -> tuple[SessionSummary, bool]:
    """(running-kind summary of ``events``, degraded), as every summary backend extracts.

    The summarizer call is bounded by ``summarizer_timeout_s`` (default
    ``config.summarizer_timeout_s``); when it fails and ``use_fallback`` is
    set, the extractive summarizer takes over under the same deadline.
    """
    if not events:
        return SessionSummary(), False
    request = SummaryRequest(
        purpose="session_summary", events=tuple(events), max_tokens=config.chunk_summary_tokens()
    )
    deadline = config.summarizer_timeout_s if summarizer_timeout_s is None else summarizer_timeout_s
    # The summarizer actor's deadline scales with the observed call times: do not cut it shorter.
    owned = summarizer_timeout_s is None and (
        isinstance(summarizer, DeadlineOwner) and summarizer.owns_deadline()
    )
    try:
        with anyio.fail_after(None if owned else deadline):
            result = await summarizer.summarize(request)
        degraded = False
    except (SummarizerError, TimeoutError) as exc:
        if not use_fallback:
            raise
        why = str(exc) or f"no answer within {deadline}s"  # a TimeoutError has no message of its own
        log.warning("session summary extraction failed (%s); using the extractive fallback", why)
        from aiden.summarizers.extractive import ExtractiveSummarizer

        try:
            # The fallback has the same deadline: it yields between slices of events, so it
            # can be cut short on a huge backlog instead of stalling the compaction or close.
            with anyio.fail_after(deadline):
                result = await ExtractiveSummarizer().summarize(request)
        except TimeoutError:
            log.error(
                "the extractive fallback also exceeded %ss on %d events; nothing extracted from them",
                deadline,
                len(events),
            )
            return SessionSummary(), True
        degraded = True
    return summary_from_result(result, kind="running"), degraded


def merged_running(
    current: SessionSummary | None, found: SessionSummary, *, top: int, stamp: int, max_items: int
) -> SessionSummary:
    """The running summary after merging ``found`` (events up to seq ``top``) into ``current`` (pure)."""
    through = current.through_seq if current is not None else 0
    base = current or SessionSummary(kind="running", session_id=_new_session_id(), created_at=stamp)
    merged = merge_summaries(base, found, max_items=max_items)
    return msgspec.structs.replace(
        merged,
        kind="running",
        session_id=base.session_id or _new_session_id(),
        created_at=base.created_at or stamp,
        through="",
        through_seq=max(through, top),
    )


def session_ending(
    current: SessionSummary | None,
    found: SessionSummary,
    *,
    seqs: Sequence[int],
    stamp: int,
    max_items: int,
) -> tuple[SessionSummary, SessionSummary | None]:
    """(running, final) at a session end or checkpoint (pure).

    ``final`` is the dated session summary (kind ``session``, the running
    summary's id); ``running`` is the running summary to write back with it.
    ``final`` is None when nothing durable is left: write nothing then
    (``running`` is the empty merge, for the caller's report).
    """
    base = current or SessionSummary(kind="running", session_id=_new_session_id(), created_at=stamp)
    merged = merge_summaries(base, found, max_items=max_items)
    if merged.is_empty:
        return merged, None
    running = msgspec.structs.replace(
        merged,
        kind="running",
        session_id=base.session_id,
        created_at=base.created_at or stamp,
        through_seq=max([base.through_seq, *seqs]),
    )
    final = msgspec.structs.replace(
        merged, kind="session", session_id=base.session_id, created_at=stamp, through="", through_seq=0
    )
    return running, final


class SessionSummaryWriter:
    """The two death-point writers plus the manual checkpoint, for one memory root.

    One instance per runtime (its lock serializes the read-merge-write cycles).
    With ``use_fallback`` (the default) a failing ``summarizer`` is replaced by
    the extractive one; ``use_fallback=False`` lets its errors propagate.
    """

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        summarizer: Summarizer,
        config: Config,
        *,
        use_fallback: bool = True,
        max_items: int = DEFAULT_MAX_ITEMS,
    ) -> None:
        self._layout = layout
        self._storage = storage
        self._summarizer = summarizer
        self._config = config
        self._use_fallback = use_fallback
        self._max_items = max_items
        # The anyio lock orders this runtime's merges; the flock makes each read-merge-write of
        # the running summary (and a session file + cap) atomic against other processes on the
        # root. Extraction (a summarizer call) runs outside the flock, the merge re-reads inside.
        self._lock = anyio.Lock()
        self._flock = SessionLock(storage, layout.long_term / SUMMARIES_LOCK_NAME)

    @property
    def running_path(self) -> Path:
        """``session/running_summary.md``."""
        return running_summary_path(self._layout)

    async def extract(
        self, events: Sequence[SessionEvent], *, summarizer_timeout_s: float | None = None
    ) -> tuple[SessionSummary, bool]:
        """(summary of ``events``, degraded). Raises only if the summarizer fails and fallback is off.

        ``summarizer_timeout_s`` (default: the configured deadline) bounds the summarizer call.
        """
        return await extract_summary(
            self._summarizer,
            self._config,
            events,
            use_fallback=self._use_fallback,
            summarizer_timeout_s=summarizer_timeout_s,
        )

    def _read_running(self) -> SessionSummary | None:
        return read_summary(self.running_path, kind="running")

    async def merge_running_summary(self, events: Sequence[SessionEvent], *, now: float) -> SessionSummary:
        """Before a compaction: merge the findings of ``events`` into the running summary file.

        Events at or below the file's ``through_seq`` were merged already (a
        compaction that was retried) and are skipped, so this is idempotent.
        Returns the running summary as written.
        """
        async with self._lock:
            current = await anyio.to_thread.run_sync(self._read_running)
            through = current.through_seq if current is not None else 0
            found, _ = await self.extract([e for e in events if e.seq > through or e.seq == 0])
            top = max((e.seq for e in events), default=0)
            return await anyio.to_thread.run_sync(self._merge_running, found, top, int(now))

    def _merge_running(self, found: SessionSummary, top: int, stamp: int) -> SessionSummary:
        with self._held():
            # Re-read: another process may have merged meanwhile.
            merged = merged_running(
                self._read_running(), found, top=top, stamp=stamp, max_items=self._max_items
            )
            write_summary(self._storage, self.running_path, merged)
            return merged

    @contextmanager
    def _held(self, flock: SessionLock | None = None) -> Iterator[None]:
        flock = self._flock if flock is None else flock
        flock.acquire(self._config.lock_timeout_s)
        try:
            yield
        finally:
            flock.release()

    async def write_session_summary(
        self,
        events: Sequence[SessionEvent],
        *,
        now: float,
        reason: str = "completion",
        summarizer_timeout_s: float | None = None,
    ) -> SummaryWrite:
        """At session end: running summary + extraction of ``events`` (the hot window) -> dated file.

        ``reason`` is informative ("completion", "cancellation", "rotation",
        "checkpoint"). Nothing is written when the session left nothing durable.
        The store cap is enforced after a write.
        """
        async with self._ordered(summarizer_timeout_s) as flock:
            found, degraded = await self.extract(events, summarizer_timeout_s=summarizer_timeout_s)
            return await anyio.to_thread.run_sync(
                self._write_session, flock, found, [e.seq for e in events], int(now), reason, degraded
            )

    @asynccontextmanager
    async def _ordered(self, wait_s: float | None) -> AsyncIterator[SessionLock]:
        """After this runtime's merges in flight; with ``wait_s`` (closing), not longer than that behind one.

        Yields the flock to hold for the file updates. A merge holds the ordering
        lock across its summarizer call, so a hung summarizer would hold a close
        for its whole deadline. Past ``wait_s`` the session summary is written
        beside the merge, under a flock of its own descriptor (which excludes the
        merge's as another process's would); the events being merged are still in
        the hot window that the session summary extracts, and the merge is
        cancelled with the memory.
        """
        if wait_s is None:
            async with self._lock:
                yield self._flock
            return
        acquired = False
        with anyio.move_on_after(wait_s):
            await self._lock.acquire()
            acquired = True
        if not acquired:
            log.warning(
                "closing: a running-summary merge is still waiting for the summarizer after %ss "
                "(close_timeout_s); writing the session summary beside it, the merge is cancelled",
                wait_s,
            )
        own = None if acquired else SessionLock(self._storage, self._layout.long_term / SUMMARIES_LOCK_NAME)
        try:
            yield self._flock if own is None else own
        finally:
            if own is not None:
                own.close()
            if acquired:
                self._lock.release()

    def _write_session(
        self,
        flock: SessionLock,
        found: SessionSummary,
        seqs: Sequence[int],
        stamp: int,
        reason: str,
        degraded: bool,
    ) -> SummaryWrite:
        with self._held(flock):
            running, final = session_ending(
                self._read_running(), found, seqs=seqs, stamp=stamp, max_items=self._max_items
            )
            if final is None:
                return SummaryWrite(path=None, summary=running, reason=reason, degraded=degraded)
            path = self._write_final(running, final)
            cap = self._enforce_cap(stamp)
            return SummaryWrite(path=str(path), summary=final, reason=reason, degraded=degraded, cap=cap)

    async def checkpoint(self, events: Sequence[SessionEvent], *, now: float) -> SummaryWrite:
        """The manual 'checkpoint' command: force the durable summary now, mid-session."""
        return await self.write_session_summary(events, now=now, reason="checkpoint")

    def _write_final(self, running: SessionSummary, final: SessionSummary) -> Path:
        path = self._existing_file(final.session_id)
        if path is None:
            path = (
                self._layout.long_term / "sessions" / session_file_name(running.created_at, final.session_id)
            )
        # The running summary first: the session file is derived from it, never the other way.
        if self._layout.session.is_dir():
            write_summary(self._storage, self.running_path, running)
        write_summary(self._storage, path, final)
        return path

    def _existing_file(self, session_id: str) -> Path | None:
        for path in list_session_files(self._layout):
            match = SESSION_FILE.fullmatch(path.name)
            if match is not None and match.group(2) == session_id:
                return path
        return None

    def _enforce_cap(self, now: int) -> CapResult:
        return enforce_cap(
            self._layout,
            self._storage,
            keep=self._config.session_summaries_keep,
            now=now,
            max_items=self._max_items,
        )
