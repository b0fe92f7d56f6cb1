"""Writing durable summaries: the running summary before each compaction, the dated session
summary at session end or checkpoint, and the store cap.

:class:`SummaryFlow` is shared with PostgreSQL; a backend supplies the reads and writes under
its lock. Extraction falls back to the extractive summarizer, so a provider outage never drops knowledge.

The cap merges the oldest summaries into ``digest.md`` before deleting them; the digest's
watermark ``through`` lets a re-run after a crash delete leftovers without merging them again.
That holds because every write's stem is newer than every stored stem and the watermark
(:func:`session_stem`): a summary at or below ``through`` is one the digest merged.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Final, Protocol

import anyio
import msgspec

from aiden.config import Config
from aiden.errors import StorageError, SummarizerError
from aiden.events import SessionEvent
from aiden.longterm.files import (
    MAX_SUMMARY_BYTES,
    digest_path,
    list_session_files,
    read_summary,
    running_summary_path,
    session_file_name,
    stem_stamp,
    write_summary,
)
from aiden.longterm.project import fit_digest
from aiden.longterm.summaries import (
    SessionSummary,
    merge_summaries,
    render_summary_md,
    summary_from_result,
)
from aiden.storage.fs import Storage
from aiden.storage.layout import SUMMARIES_LOCK_NAME, Layout
from aiden.storage.locks import SessionLock
from aiden.summarizers.protocol import DeadlineOwner, Summarizer, SummaryRequest

__all__ = [
    "DIGEST_MAX_BYTES",
    "SUMMARIES_LOCK_NAME",
    "CapPlan",
    "CapResult",
    "FileSummaryRows",
    "SessionSummaryWriter",
    "SummaryFlow",
    "SummaryRows",
    "SummaryWrite",
    "cap_digest",
    "extract_summary",
    "merged_running",
    "plan_cap",
    "session_ending",
    "session_stem",
]

log = logging.getLogger("aiden.longterm")

DIGEST_MAX_BYTES: Final = MAX_SUMMARY_BYTES // 4
"""What the digest's items take at most (UTF-8): well within what the file store reads back, so
every backend keeps the same digest; some 16,000 tokens of English, twice the largest PROJECT MEMORY
block, for the block to choose from."""


def _new_session_id() -> str:
    return secrets.token_hex(4)


def merged_running(current: SessionSummary | None, found: SessionSummary, *, top: int, stamp: int) -> SessionSummary:
    """The running summary after merging ``found`` (events up to seq ``top``) into ``current``."""
    base = current or SessionSummary(kind="running", session_id=_new_session_id(), created_at=stamp)
    merged = merge_summaries(base, found)
    return msgspec.structs.replace(
        merged,
        kind="running",
        session_id=base.session_id or _new_session_id(),
        created_at=base.created_at or stamp,
        through="",
        through_seq=max(base.through_seq, top),
    )


def session_ending(
    current: SessionSummary | None, found: SessionSummary, *, seqs: Sequence[int], stamp: int
) -> tuple[SessionSummary, SessionSummary | None]:
    """(running, final) at a session end or checkpoint: ``final`` is the dated session summary, ``running``
    the running summary to write back with it. ``final`` is None when nothing durable is left.
    """
    base = current or SessionSummary(kind="running", session_id=_new_session_id(), created_at=stamp)
    merged = merge_summaries(base, found)
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


def session_stem(stems: Iterable[str], *, through: str, session_id: str, stamp: int) -> str:
    """Pure: the stem of session ``session_id``'s summary written at ``stamp``, given the stored ``stems``
    and the digest's watermark ``through``.

    Stems order the summaries (newest wins in the block, the oldest go into the digest first), so a
    write's stem is newer than every other one and the watermark: the write's time, a second past the
    newest when that is not older (summaries closed within a second, another worker's clock). The
    session's own stem stays while it is still the newest (a checkpoint, then the close).
    """
    stems = list(stems)
    own = [s for s in stems if s.partition("-")[2] == session_id]
    newest = max([through, *(s for s in stems if s.partition("-")[2] != session_id)])
    if own and max(own) > newest:
        return max(own)
    return session_file_name(max(stamp, stem_stamp(newest) + 1), session_id)[: -len(".md")]


class FileSummaryRows:
    """:class:`SummaryRows` on files: every write is atomic."""

    def __init__(self, layout: Layout, storage: Storage, *, keep: int) -> None:
        self.layout = layout
        self.storage = storage
        self._keep = keep
        self.running_path = running_summary_path(layout)
        self._read_from: tuple[int, int] | None = None

    def read_running(self) -> SessionSummary | None:
        self._read_from = _dir_id(self.layout.session)  # which session/ this running summary is of
        return read_summary(self.running_path, kind="running")

    def write_running(self, summary: SessionSummary) -> None:
        write_summary(self.storage, self.running_path, summary)

    def write_session(self, running: SessionSummary, final: SessionSummary) -> str:
        sid = final.session_id
        files = list_session_files(self.layout)
        digest = read_summary(digest_path(self.layout), kind="digest")
        stem = session_stem(
            (p.stem for p in files), through=digest.through if digest else "", session_id=sid, stamp=final.created_at
        )
        path = self.layout.sessions / f"{stem}.md"
        # The running summary first: the session file derives from it. Only into the session/ it was
        # read from: another process's rotation may have archived that one (with its running summary).
        if self._read_from is not None and _dir_id(self.layout.session) == self._read_from:
            try:
                self.storage.write_atomic(self.running_path, render_summary_md(running).encode("utf-8"))
            except StorageError as exc:
                if exc.errno != errno.ENOENT:  # ENOENT: rotated away between the check and the write
                    raise
        write_summary(self.storage, path, final)
        # The session's summary moved to a newer stem: its older file goes (after the write: a crash
        # between the two leaves a duplicate, which the block's merge collapses).
        stale = [p for p in files if p.stem.partition("-")[2] == sid and p != path]
        for old in stale:
            self.storage.unlink(old)
        if stale:
            self.storage.fsync_dir(path.parent)
        return str(path)

    def enforce_cap(self, now: int) -> CapResult:
        """:func:`cap_digest` applied to ``long_term/sessions/``."""
        files = {p.stem: p for p in list_session_files(self.layout)}
        path = digest_path(self.layout)
        cap, digest = cap_digest(
            files,
            read_summary(path, kind="digest"),
            lambda stem: read_summary(files[stem], kind="session"),
            keep=self._keep,
            now=now,
        )
        if digest is not None:
            self.storage.checkpoint("digest.before_write")
            write_summary(self.storage, path, digest)
            self.storage.checkpoint("digest.after_write")
        for stem in cap.deleted:
            self.storage.unlink(files[stem])
        if cap.deleted:
            self.storage.fsync_dir(files[cap.deleted[0]].parent)
        return cap


def _dir_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class CapPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`enforce_cap` will do: stems to merge into the digest, stems only to delete."""

    merge: tuple[str, ...] = ()
    delete_only: tuple[str, ...] = ()


class CapResult(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`enforce_cap` did."""

    merged: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    digest_written: bool = False


def plan_cap(stems: Sequence[str], *, keep: int, through: str) -> CapPlan:
    """Pure: which of ``stems`` (any order: they sort by their UTC stamp) to merge or just delete so that the newest ``keep`` remain.

    Those at or below the digest's watermark ``through`` are only deleted: the digest holds them already.
    """
    if keep < 0:
        raise ValueError("keep must be >= 0")
    ordered = sorted(stems)
    excess = ordered[: max(0, len(ordered) - keep)]
    merge = tuple(s for s in excess if not through or s > through)
    delete_only = tuple(s for s in excess if through and s <= through)
    return CapPlan(merge=merge, delete_only=delete_only)


def cap_digest(
    stems: Iterable[str],
    digest: SessionSummary | None,
    read: Callable[[str], SessionSummary | None],
    *,
    keep: int,
    now: int,
) -> tuple[CapResult, SessionSummary | None]:
    """Pure but for ``read`` (a stem's summary, None if gone): what the cap of ``stems`` does
    (:func:`plan_cap`), and ``digest`` (None: none yet) with the merged summaries folded in (later
    ones win), to write before anything is deleted; None when nothing is merged."""
    digest = digest or SessionSummary(kind="digest", session_id="digest")
    plan = plan_cap(list(stems), keep=keep, through=digest.through)
    # All of delete_only is older than merge (at or below the watermark): this is the sorted order.
    deleted = (*plan.delete_only, *plan.merge)
    cap = CapResult(merged=plan.merge, deleted=deleted, digest_written=bool(plan.merge))
    if not plan.merge:
        return cap, None
    merged = [summary for summary in map(read, plan.merge) if summary is not None]
    for summary in merged:
        digest = merge_summaries(digest, summary, max_items=sys.maxsize)
    # Over DIGEST_MAX_BYTES the digest keeps its most valuable items (news, then recency), not the newest:
    # a chat session's summary alone fills a section, and the newest would leave no older session.
    digest = fit_digest(digest, merged, max_bytes=DIGEST_MAX_BYTES)
    return cap, msgspec.structs.replace(
        digest, kind="digest", session_id="digest", created_at=now, through=plan.merge[-1], through_seq=0
    )


SESSION_END_INPUT_CHARS = 80_000
"""What a session-end summary extracts from the hot window (its newest events), so a close costs the
same on any backlog; older hot events reach it through the running summary when they are compacted."""


def newest_within(events: Sequence[SessionEvent], max_chars: int) -> Sequence[SessionEvent]:
    """The newest ``events`` whose text fits ``max_chars`` (at least the newest one), in order."""
    used = 0
    start = len(events)
    while start > 0:
        event = events[start - 1]
        used += len(event.content) + len(event.tool_args or "")
        if used > max_chars and start < len(events):
            break
        start -= 1
    return events[start:]


class SummaryWrite(msgspec.Struct, frozen=True, kw_only=True):
    """What a session-end write or checkpoint did."""

    path: str | None
    """The dated summary file written (``None``: nothing durable to write)."""
    summary: SessionSummary
    reason: str
    degraded: bool = False
    """True when the summarizer failed and the extractive fallback was used."""
    cap: CapResult = CapResult()


async def extract_summary(
    summarizer: Summarizer,
    config: Config,
    events: Sequence[SessionEvent],
    *,
    use_fallback: bool = True,
    summarizer_timeout_s: float | None = None,
) -> tuple[SessionSummary, bool]:
    """(running-kind summary of ``events``, degraded), as every summary backend extracts.

    The call is bounded by ``summarizer_timeout_s`` (default: the configured one); when it fails and
    ``use_fallback`` is set, the extractive summarizer takes over under the same deadline.
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
            return summary_from_result(await summarizer.summarize(request), kind="running"), False
    except (SummarizerError, TimeoutError) as exc:
        if not use_fallback:
            raise
        why = str(exc) or f"no answer within {deadline}s"  # a TimeoutError has no message of its own
        log.warning("session summary extraction failed (%s); using the extractive fallback", why)
    from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer

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
    return summary_from_result(result, kind="running"), True


class SummaryRows(Protocol):
    """One locked read-merge-write's view of a backend's summaries (files, or rows in a transaction)."""

    def read_running(self) -> SessionSummary | None:
        """The running summary as stored (None: none yet)."""
        ...

    def write_running(self, summary: SessionSummary) -> None:
        """Store the running summary."""
        ...

    def write_session(self, running: SessionSummary, final: SessionSummary) -> str:
        """Store ``running``, then the dated ``final`` (derived from it, never the other way); its locator."""
        ...

    def enforce_cap(self, now: int) -> CapResult:
        """Apply the store cap (oldest session summaries into the digest)."""
        ...


class SummaryFlow(ABC):
    """The three writers every summary backend shares; a backend supplies the storage under a lock.

    Extraction runs outside the backend's cross-process lock; each read-merge-write then re-reads
    inside it. ``use_fallback=False`` lets a failing ``summarizer``'s errors propagate.
    """

    def __init__(self, summarizer: Summarizer, config: Config, *, use_fallback: bool = True) -> None:
        self._summarizer = summarizer
        self._config = config
        self._use_fallback = use_fallback
        # Orders this runtime's writers; the backend's lock orders them against other processes.
        self._lock = anyio.Lock()
        # The summarizer call of the merge in flight: a close that stops waiting for it cancels it, or
        # the session summary's own call would queue behind it in the summarizer until its deadline too.
        self._merging: anyio.CancelScope | None = None

    # --- what a backend implements (blocking; called from a worker thread) -----------
    @abstractmethod
    def running(self) -> SessionSummary | None:
        """The active session's running summary, read without the lock (blocking)."""

    @abstractmethod
    def _locked(self, what: str) -> AbstractContextManager[SummaryRows]:
        """The backend's cross-process lock (at most ``config.lock_timeout_s``) around the update ``what``.

        It must exclude this runtime's merge as it excludes another process's: a close that gave up
        waiting behind a merge writes beside it, without this runtime's ordering lock.
        """

    # --- the async API ----------------------------------------------------------------
    async def extract(
        self, events: Sequence[SessionEvent], *, summarizer_timeout_s: float | None = None
    ) -> tuple[SessionSummary, bool]:
        """(summary of ``events``, degraded); raises only if the summarizer fails and fallback is off."""
        return await extract_summary(
            self._summarizer,
            self._config,
            events,
            use_fallback=self._use_fallback,
            summarizer_timeout_s=summarizer_timeout_s,
        )

    async def merge_running_summary(self, events: Sequence[SessionEvent], *, now: float) -> SessionSummary:
        """Before a compaction: merge the findings of ``events`` into the running summary; returns it as written.

        A pass whose events all lie at or below its ``through_seq`` is a retry of a merge that was
        written: skipped, so a retry is idempotent. Otherwise its events at or below the watermark are
        ones an earlier pass kept hot (a pinned event) and this one compacts at last: merged now.
        """
        async with self._lock:
            current = await anyio.to_thread.run_sync(self.running)
            through = current.through_seq if current is not None else 0
            top = max((e.seq for e in events), default=0)
            fresh = list(events) if top > through else [e for e in events if e.seq == 0]
            with anyio.CancelScope() as self._merging:
                found, _ = await self.extract(fresh)
                return await anyio.to_thread.run_sync(self._merge_running, found, top, int(now))
            # Cancelled by a close: its events are in the hot window the session summary extracts.
            return current or SessionSummary(kind="running")

    def _merge_running(self, found: SessionSummary, top: int, stamp: int) -> SessionSummary:
        with self._locked("merging the running summary") as rows:
            # Re-read: another process may have merged meanwhile.
            merged = merged_running(rows.read_running(), found, top=top, stamp=stamp)
            rows.write_running(merged)
            return merged

    async def write_session_summary(
        self,
        events: Sequence[SessionEvent],
        *,
        now: float,
        reason: str = "completion",
        summarizer_timeout_s: float | None = None,
    ) -> SummaryWrite:
        """At session end: running summary + extraction of ``events`` (the hot window) -> the dated summary.

        Nothing is written when the session left nothing durable; the store cap is enforced after a write.
        """
        read = newest_within(events, SESSION_END_INPUT_CHARS)
        # The running summary counts the hot window as merged only when all of it was read: events
        # left out of a bounded read are merged when their compaction comes, not skipped then.
        merged_seqs = [e.seq for e in events] if len(read) == len(events) else []
        async with self._ordered(summarizer_timeout_s):
            found, degraded = await self.extract(read, summarizer_timeout_s=summarizer_timeout_s)
            return await anyio.to_thread.run_sync(
                self._write_session, found, merged_seqs, int(now), reason, degraded
            )

    async def checkpoint(self, events: Sequence[SessionEvent], *, now: float) -> SummaryWrite:
        """The manual 'checkpoint' command: force the durable summary now, mid-session."""
        return await self.write_session_summary(events, now=now, reason="checkpoint")

    @asynccontextmanager
    async def _ordered(self, wait_s: float | None) -> AsyncIterator[None]:
        """After this runtime's merges in flight; with ``wait_s`` (closing), not longer than that behind one.

        Past it the write goes beside the merge: a hung summarizer must not hold a close for its
        whole deadline. The merge's events are still in the hot window the session summary extracts.
        """
        acquired = False
        with anyio.move_on_after(wait_s):  # None: no deadline
            await self._lock.acquire()
            acquired = True
        if not acquired and self._merging is not None:
            self._merging.cancel()
            log.warning(
                "closing: a running-summary merge is still waiting for the summarizer after %ss "
                "(close_timeout_s); writing the session summary beside it, the merge is cancelled",
                wait_s,
            )
        try:
            yield
        finally:
            if acquired:
                self._lock.release()

    def _write_session(
        self,
        found: SessionSummary,
        seqs: Sequence[int],
        stamp: int,
        reason: str,
        degraded: bool,
    ) -> SummaryWrite:
        with self._locked("writing the session summary") as rows:
            running, final = session_ending(rows.read_running(), found, seqs=seqs, stamp=stamp)
            if final is None:
                return SummaryWrite(path=None, summary=running, reason=reason, degraded=degraded)
            path = rows.write_session(running, final)
            cap = rows.enforce_cap(stamp)
            return SummaryWrite(path=path, summary=final, reason=reason, degraded=degraded, cap=cap)


class SessionSummaryWriter(SummaryFlow, FileSummaryRows):
    """The summaries under ``long_term/`` (and ``session/running_summary.md``) of one memory root.

    ``long_term/.summaries.lock`` (a flock) makes each read-merge-write atomic against other processes.
    """

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        summarizer: Summarizer,
        config: Config,
        *,
        use_fallback: bool = True,
    ) -> None:
        SummaryFlow.__init__(self, summarizer, config, use_fallback=use_fallback)
        FileSummaryRows.__init__(self, layout, storage, keep=config.session_summaries_keep)

    def running(self) -> SessionSummary | None:
        """The running summary file as it is now (blocking)."""
        return self.read_running()

    @contextmanager
    def _locked(self, what: str) -> Iterator[SummaryRows]:
        # A descriptor per use: a call beside a merge is excluded as another process's would be,
        # and a writer never closed explicitly holds no descriptor.
        flock = SessionLock(self.storage, self.layout.summaries_lock)
        try:
            with flock.held(self._config.lock_timeout_s):
                yield self
        finally:
            flock.close()
