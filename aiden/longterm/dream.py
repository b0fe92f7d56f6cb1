"""Dream (seed 003): turn new history into focused edits of SOUL.md, USER.md and MEMORY.md.

A run reads the history records after ``.dream_cursor`` and the three files
under ``long_term/``, asks its editor for edits (default: the deterministic
extractive path; :class:`SummarizerDreamEditor` with a
:class:`~aiden.summarizers.llm.LiteLLMSummarizer` is the LLM path; an open
memory's Dream asks the memory's configured summarizer through the summarizer
actor, under its deadline and output validation), applies
them, writes the changed files atomically, records the result as a git commit
with a readable message, and only then advances ``.dream_cursor``. If the
editor fails, nothing is written and the cursor stays. Before every change,
edits made to the files by hand are committed first, so every version of the
three files is in the log. :meth:`Dream.dream_log` lists versions and
:meth:`Dream.restore` brings back an earlier one (itself a new commit).

:func:`run_dream_schedule` runs Dream every ``interval_s`` and on demand.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

import anyio
import msgspec
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream

from aiden.errors import AidenError, DreamError
from aiden.events import SessionEvent
from aiden.longterm.dream_edits import (
    LONG_TERM_FILES,
    DreamEdit,
    Version,
    apply_edits,
    describe_edits,
    plan_edits,
)
from aiden.longterm.files import ensure_dir
from aiden.longterm.gitstore import GitStore, read_long_term_files
from aiden.longterm.history import HistoryRecord, HistoryStore
from aiden.longterm.summaries import summary_from_result
from aiden.storage.fs import Storage
from aiden.storage.layout import DREAM_LOCK_NAME, Layout
from aiden.storage.locks import SessionLock
from aiden.summarizers.extractive import ExtractiveSummarizer
from aiden.summarizers.protocol import Summarizer, SummaryRequest

__all__ = [
    "DREAM_LOCK_NAME",
    "Dream",
    "DreamEditor",
    "DreamOutcome",
    "SummarizerDreamEditor",
    "propose_run",
    "run_dream_schedule",
]

log = logging.getLogger("aiden.longterm")

class DreamEditor(Protocol):
    """Proposes edits of the long-term files from new history records."""

    async def propose(self, records: Sequence[HistoryRecord], files: Mapping[str, str]) -> list[DreamEdit]:
        """Edits for ``files`` (name -> text) learned from ``records``; raise to fail the run."""
        ...


class SummarizerDreamEditor:
    """Edits via any Summarizer (``session_summary`` over the records), then :func:`plan_edits`.

    The default summarizer is the deterministic :class:`ExtractiveSummarizer`;
    pass a ``LiteLLMSummarizer`` for the LLM path. Summarizer errors propagate.
    """

    def __init__(self, summarizer: Summarizer | None = None, *, max_tokens: int = 1200) -> None:
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.max_tokens = max_tokens

    async def propose(self, records: Sequence[HistoryRecord], files: Mapping[str, str]) -> list[DreamEdit]:
        """Summarize ``records`` into the five sections, then plan focused edits."""
        events = tuple(
            SessionEvent(type="system_event", role="history", content=r.content, seq=r.cursor)
            for r in records
        )
        request = SummaryRequest(purpose="session_summary", events=events, max_tokens=self.max_tokens)
        result = await self.summarizer.summarize(request)
        return plan_edits(summary_from_result(result), files)


class DreamOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a Dream run did. ``ran`` is False when there was no new history."""

    ran: bool
    records: int = 0
    edits: tuple[DreamEdit, ...] = ()
    commit_id: str | None = None
    cursor: int = 0
    message: str = ""


async def propose_run(
    editor: DreamEditor, records: Sequence[HistoryRecord], old: Mapping[str, bytes | None]
) -> tuple[dict[str, bytes | None], tuple[DreamEdit, ...], str]:
    """(new file contents, edits, version message) for one run over ``records`` (non-empty).

    ``old`` maps each of :data:`LONG_TERM_FILES` to its content (None: absent);
    a file that was absent stays absent unless an edit creates it. Every Dream
    backend plans its run with this; editor errors propagate.
    """
    texts: dict[str, str] = {k: (old.get(k) or b"").decode("utf-8", errors="replace") for k in LONG_TERM_FILES}
    edits = await editor.propose(records, texts)
    applied = apply_edits(texts, edits)
    new: dict[str, bytes | None] = {
        k: (applied[k].encode("utf-8") if (old.get(k) is not None or applied[k] != texts[k]) else None)
        for k in LONG_TERM_FILES
    }
    message = describe_edits(edits, first_cursor=records[0].cursor, last_cursor=records[-1].cursor)
    return new, tuple(edits), message


class Dream:
    """Dream over ``long_term/`` (one instance per runtime; runs and restores are serialized)."""

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        history: HistoryStore,
        *,
        editor: DreamEditor | None = None,
        max_records: int = 200,
    ) -> None:
        if max_records < 1:
            raise ValueError("max_records must be >= 1")
        self.root = layout.long_term
        self._storage = storage
        self._history = history
        self._editor: DreamEditor = editor or SummarizerDreamEditor()
        self._max_records = max_records
        self._git = GitStore(self.root, LONG_TERM_FILES, storage)
        # Within this runtime the anyio lock serializes runs and restores; across processes
        # sharing the root the flock does (a second Dream would fold the same records twice).
        self._lock = anyio.Lock()
        self._flock = SessionLock(storage, layout.dream_lock)

    # --- files -------------------------------------------------------------------------------
    def _read_files(self) -> dict[str, bytes | None]:
        return read_long_term_files(self.root)

    def _snapshot_manual_edits(self, now: int) -> None:
        """Commit the files as they are if they differ from the last version (hand edits)."""
        current = self._read_files()
        first = self._git.head() is None
        if first and all(v is None for v in current.values()):
            return
        message = "snapshot: long-term files before the first Dream" if first else "snapshot: manual edits"
        self._git.commit(current, message, now=now)

    def _write_files(self, new: Mapping[str, bytes | None], old: Mapping[str, bytes | None]) -> None:
        ensure_dir(self._storage, self.root)
        for name in LONG_TERM_FILES:
            if new.get(name) == old.get(name):
                continue
            data = new.get(name)
            if data is None:
                self._storage.unlink(self.root / name)
            else:
                self._storage.write_atomic(self.root / name, data)
        self._storage.fsync_dir(self.root)

    def _commit_run(
        self,
        old: Mapping[str, bytes | None],
        new: Mapping[str, bytes | None],
        message: str,
        cursor: int,
        now: int,
    ) -> str | None:
        commit_id: str | None = None
        if dict(new) != dict(old):
            self._snapshot_manual_edits(now)
            self._write_files(new, old)
            self._storage.checkpoint("dream.before_commit")
            commit_id = self._git.commit(new, message, now=now)
        self._storage.checkpoint("dream.before_cursor")
        self._history.set_dream_cursor(cursor)
        return commit_id

    # --- public --------------------------------------------------------------------------------
    async def run(self, *, now: float) -> DreamOutcome:
        """One Dream run. If the editor raises, the error propagates and nothing changed."""
        async with self._lock:
            if not await anyio.to_thread.run_sync(self._flock.try_acquire):
                return DreamOutcome(
                    ran=False, message=f"another process is running Dream ({DREAM_LOCK_NAME} is held)"
                )
            try:
                return await self._run(now)
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._flock.release)

    async def _run(self, now: float) -> DreamOutcome:
        start = await anyio.to_thread.run_sync(self._history.dream_cursor)
        records = await anyio.to_thread.run_sync(
            lambda: self._history.read_after(start, limit=self._max_records)
        )
        if not records:
            return DreamOutcome(ran=False, cursor=start)
        old = await anyio.to_thread.run_sync(self._read_files)
        new, edits, message = await propose_run(self._editor, records, old)
        last = records[-1].cursor
        commit_id = await anyio.to_thread.run_sync(self._commit_run, old, new, message, last, int(now))
        return DreamOutcome(
            ran=True,
            records=len(records),
            edits=edits,
            commit_id=commit_id,
            cursor=last,
            message=message,
        )

    async def dream_log(self, limit: int = 20) -> list[Version]:
        """The newest ``limit`` versions of the long-term files, newest first."""
        return await anyio.to_thread.run_sync(self._git.log, limit)

    async def restore(self, target: str | int, *, now: float) -> Version:
        """Bring back version ``target`` (commit id / prefix, or steps back: 1 = the previous version).

        The restored state is committed as a new version and returned. Raises
        :class:`~aiden.errors.VersionNotFoundError` for an unknown target.
        """
        async with self._lock:
            if not await anyio.to_thread.run_sync(self._flock.try_acquire):
                raise DreamError(
                    f"another process is running Dream ({DREAM_LOCK_NAME} is held): restore refused"
                )
            try:
                return await anyio.to_thread.run_sync(self._restore_sync, target, int(now))
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._flock.release)

    def _restore_sync(self, target: str | int, now: int) -> Version:
        self._snapshot_manual_edits(now)
        commit_id = self._git.resolve(target)
        files = self._git.read(commit_id)
        wanted: dict[str, bytes | None] = {name: files.get(name) for name in LONG_TERM_FILES}
        source = next((v for v in self._git.log(limit=10_000) if v.commit_id == commit_id), None)
        title = source.title if source is not None else ""
        self._write_files(wanted, self._read_files())
        message = f"restore: {commit_id[:12]} ({title})"
        new_id = self._git.commit(wanted, message, now=now) or commit_id
        return Version(commit_id=new_id, timestamp=now, message=message)


async def run_dream_schedule(
    dream_once: Callable[[], Awaitable[object]],
    interval_s: float,
    *,
    requests: MemoryObjectReceiveStream[None] | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``dream_once`` every ``interval_s`` seconds and whenever a request arrives (``/dream``).

    An on-demand run restarts the interval. An :class:`~aiden.errors.AidenError`
    (a failed run) is logged and the schedule goes on; so is any other exception
    (logged with its traceback); cancellation propagates.
    Returns when the send side of ``requests`` is closed; the schedule owns
    (and closes) ``requests``.
    """
    if interval_s <= 0:
        raise ValueError("interval_s must be > 0")
    task_status.started()
    try:
        await _dream_loop(dream_once, interval_s, requests)
    finally:
        if requests is not None:
            requests.close()


async def _dream_loop(
    dream_once: Callable[[], Awaitable[object]],
    interval_s: float,
    requests: MemoryObjectReceiveStream[None] | None,
) -> None:
    last_run = anyio.current_time()
    while True:
        wait = max(0.0, last_run + interval_s - anyio.current_time())
        if requests is not None:
            with anyio.move_on_after(wait):
                try:
                    await requests.receive()
                except anyio.EndOfStream:
                    return
        else:
            await anyio.sleep(wait)
        last_run = anyio.current_time()
        try:
            await dream_once()
        except AidenError as exc:
            log.error("dream run failed: %s", exc)
        except Exception:
            # A bug, not a condition (every boundary translates to AidenError): logged with its
            # traceback, and the schedule goes on, since an error escaping here would end the
            # runtime's task group and with it every other actor of the memory.
            log.exception("dream run failed with an unexpected error")
