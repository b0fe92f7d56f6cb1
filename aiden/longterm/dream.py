"""Dream: turn new history into focused edits of SOUL.md, USER.md and MEMORY.md.

A run asks its editor for edits of the records after Dream's cursor, applies them, records a
version, and only then advances the cursor; if the editor fails nothing is written.
:class:`DreamFlow` is shared by every backend; :class:`Dream` is the file backend's, which
commits hand edits first so every version of the three files is in the log.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Generic, Protocol, TypeVar

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
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import Summarizer, SummaryRequest

__all__ = [
    "DREAM_LOCK_NAME",
    "Dream",
    "DreamEditor",
    "DreamFlow",
    "DreamOutcome",
    "SummarizerDreamEditor",
    "run_dream_schedule",
]

log = logging.getLogger("aiden.longterm")

class DreamEditor(Protocol):
    """Proposes edits of the long-term files from new history records."""

    async def propose(self, records: Sequence[HistoryRecord], files: Mapping[str, str]) -> list[DreamEdit]:
        """Edits for ``files`` (name -> text) learned from ``records``; raise to fail the run."""
        ...


class SummarizerDreamEditor:
    """Edits via any Summarizer (``session_summary`` over the records), then :func:`plan_edits`; errors propagate.

    The default is the deterministic :class:`ExtractiveSummarizer`; a ``LiteLLMSummarizer`` is the LLM path.
    """

    def __init__(self, summarizer: Summarizer | None = None) -> None:
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()

    async def propose(self, records: Sequence[HistoryRecord], files: Mapping[str, str]) -> list[DreamEdit]:
        """Summarize ``records`` into the five sections, then plan focused edits."""
        events = tuple(
            SessionEvent(type="system_event", role="history", content=r.content, seq=r.cursor)
            for r in records
        )
        request = SummaryRequest(purpose="session_summary", events=events, max_tokens=1200)
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


B = TypeVar("B")


class DreamFlow(ABC, Generic[B]):
    """A run, a restore and the log as every Dream backend does them; a backend supplies the storage.

    Runs and restores are serialized in this runtime by an anyio lock and across processes by the
    backend's lock; ``held`` is the message when that lock is taken.
    """

    def __init__(self, editor: DreamEditor | None, max_records: int, held: str) -> None:
        if max_records < 1:
            raise ValueError("max_records must be >= 1")
        self._editor: DreamEditor = editor or SummarizerDreamEditor()
        self._max_records = max_records
        self._held = held
        self._lock = anyio.Lock()

    # --- what a backend implements (blocking; called from a worker thread) -----------
    @abstractmethod
    def _try_lock(self) -> bool:
        """Take the cross-process Dream lock without waiting; False if another holds it."""

    @abstractmethod
    def _unlock(self) -> None:
        """Release the cross-process Dream lock."""

    @abstractmethod
    def _start(self) -> tuple[int, list[HistoryRecord], Mapping[str, bytes | None], B]:
        """(Dream's cursor, the records after it, the files now, what :meth:`_commit_run` gets back)."""

    @abstractmethod
    def _commit_run(
        self, base: B, new: Mapping[str, bytes | None], message: str, cursor: int, now: int
    ) -> str | None:
        """Record ``new`` as a version (None: unchanged), then move Dream's cursor to ``cursor``."""

    @abstractmethod
    def _restore_sync(self, target: str | int, now: int) -> Version:
        """Record version ``target``'s files as a new version."""

    @abstractmethod
    def _log(self, limit: int) -> list[Version]:
        """The newest ``limit`` versions, newest first."""

    # --- the async API ----------------------------------------------------------------
    @asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[bool]:
        """Hold both locks; yields False (without the backend's lock) when another process holds it."""
        async with self._lock:
            if not await anyio.to_thread.run_sync(self._try_lock):
                yield False
                return
            try:
                yield True
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._unlock)

    async def run(self, *, now: float) -> DreamOutcome:
        """One Dream run (``ran=False`` when nothing is new or another process runs Dream); an editor error propagates and nothing changes."""
        async with self._exclusive() as held:
            if not held:
                return DreamOutcome(ran=False, message=self._held)
            start, records, old, base = await anyio.to_thread.run_sync(self._start)
            if not records:
                return DreamOutcome(ran=False, cursor=start)
            # A file that was absent stays absent unless an edit creates it.
            texts: dict[str, str] = {k: _text(k, old.get(k)) for k in LONG_TERM_FILES}
            edits = await self._editor.propose(records, texts)
            applied = apply_edits(texts, edits)
            new: dict[str, bytes | None] = {
                k: applied[k].encode("utf-8") if old.get(k) is not None or applied[k] != texts[k] else None
                for k in LONG_TERM_FILES
            }
            last = records[-1].cursor
            message = describe_edits(edits, first_cursor=records[0].cursor, last_cursor=last)
            commit_id = await anyio.to_thread.run_sync(self._commit_run, base, new, message, last, int(now))
            return DreamOutcome(
                ran=True,
                records=len(records),
                edits=tuple(edits),
                commit_id=commit_id,
                cursor=last,
                message=message,
            )

    async def dream_log(self, limit: int = 20) -> list[Version]:
        """The newest ``limit`` versions of the long-term files, newest first; DreamError if ``limit`` < 0."""
        # Checked here, so every backend answers alike (dulwich reads -1 as "no limit", PostgreSQL refuses it).
        if limit < 0:
            raise DreamError(f"dream_log: limit must be >= 0, got {limit}")
        return await anyio.to_thread.run_sync(self._log, limit)

    async def restore(self, target: str | int, *, now: float) -> Version:
        """Bring back version ``target`` (commit id / prefix, or steps back: 1 = the previous version) as a new version.

        Raises :class:`~aiden.errors.VersionNotFoundError` for an unknown target and
        :class:`~aiden.errors.DreamError` while another process runs Dream.
        """
        async with self._exclusive() as held:
            if not held:
                raise DreamError(f"{self._held}: restore refused")
            return await anyio.to_thread.run_sync(self._restore_sync, target, int(now))


def _text(name: str, data: bytes | None) -> str:
    """The text of long-term file ``name``; DreamError if it is not UTF-8.

    Replacing the bad bytes would write them back as U+FFFD, losing what they held: the run is refused.
    """
    try:
        return (data or b"").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DreamError(
            f"{name} is not valid UTF-8 (byte {exc.start}): Dream refused, nothing was changed; "
            f"fix or re-save {name} as UTF-8"
        ) from None


class Dream(DreamFlow[dict[str, bytes | None]]):
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
        super().__init__(editor, max_records, f"another process is running Dream ({DREAM_LOCK_NAME} is held)")
        self.root = layout.long_term
        self._storage = storage
        self._history = history
        self._git = GitStore(self.root, storage)
        self._flock = SessionLock(storage, layout.dream_lock)

    def _try_lock(self) -> bool:
        return self._flock.try_acquire()

    def _unlock(self) -> None:
        self._flock.release()

    def _snapshot_manual_edits(self, now: int) -> None:
        """Commit the files as they are if they differ from the last version (hand edits)."""
        current = read_long_term_files(self.root)
        first = self._git.head() is None
        if first and all(v is None for v in current.values()):
            return
        message = "snapshot: long-term files before the first Dream" if first else "snapshot: manual edits"
        self._git.commit(current, message, now=now)

    def _write_files(self, new: Mapping[str, bytes | None], old: Mapping[str, bytes | None]) -> None:
        ensure_dir(self._storage, self.root)
        for name in LONG_TERM_FILES:
            data = new.get(name)
            if data == old.get(name):
                continue
            if data is None:
                self._storage.unlink(self.root / name)
            else:
                self._storage.write_atomic(self.root / name, data)
        self._storage.fsync_dir(self.root)

    def _start(self) -> tuple[int, list[HistoryRecord], dict[str, bytes | None], dict[str, bytes | None]]:
        start = self._history.dream_cursor()
        records = self._history.read_after(start, limit=self._max_records)
        old = read_long_term_files(self.root) if records else {}
        return start, records, old, old

    def _commit_run(
        self,
        base: dict[str, bytes | None],
        new: Mapping[str, bytes | None],
        message: str,
        cursor: int,
        now: int,
    ) -> str | None:
        commit_id: str | None = None
        if dict(new) != base:
            self._snapshot_manual_edits(now)
            self._write_files(new, base)
            self._storage.checkpoint("dream.before_commit")
            commit_id = self._git.commit(new, message, now=now)
        self._storage.checkpoint("dream.before_cursor")
        self._history.set_dream_cursor(cursor)
        return commit_id

    def _log(self, limit: int) -> list[Version]:
        return self._git.log(limit)

    def _restore_sync(self, target: str | int, now: int) -> Version:
        self._snapshot_manual_edits(now)
        commit_id = self._git.resolve(target)
        files = self._git.read(commit_id)
        wanted: dict[str, bytes | None] = {name: files.get(name) for name in LONG_TERM_FILES}
        # resolve() looks no further back than this: the target is among them.
        version = next(v for v in self._git.log(limit=10_000) if v.commit_id == commit_id)
        self._write_files(wanted, read_long_term_files(self.root))
        message = f"restore: {commit_id[:12]} ({version.title})"
        new_id = self._git.commit(wanted, message, now=now)
        if new_id is None:
            # The files already are the target's: nothing is recorded, and the target is the answer.
            return version
        return Version(commit_id=new_id, timestamp=now, message=message)


async def run_dream_schedule(
    dream_once: Callable[[], Awaitable[object]],
    interval_s: float,
    *,
    requests: MemoryObjectReceiveStream[None],
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``dream_once`` every ``interval_s`` seconds and whenever a request arrives (``/dream``).

    An on-demand run restarts the interval. A failed run is logged and the schedule goes on;
    cancellation propagates. Returns when the send side of ``requests`` is closed (the schedule closes ``requests``).
    """
    if interval_s <= 0:
        raise ValueError("interval_s must be > 0")
    task_status.started()
    last_run = anyio.current_time()
    with requests:
        while True:
            wait = max(0.0, last_run + interval_s - anyio.current_time())
            with anyio.move_on_after(wait):
                try:
                    await requests.receive()
                except anyio.EndOfStream:
                    return
            last_run = anyio.current_time()
            try:
                await dream_once()
            except AidenError as exc:
                log.error("dream run failed: %s", exc)
            except Exception:
                # A bug (every boundary translates to AidenError): escaping here would end the
                # runtime's task group and every other actor of the memory.
                log.exception("dream run failed with an unexpected error")
