"""The scheduler's survey of the hot window: how many events it holds, and where a pass would cut it.

Both are linear in the whole hot window. An ordinary window is surveyed here; a file store's
large window in the helper process (:mod:`aiden.offload`), as a backlog's survey in a worker
thread would hold this process's GIL while appends wait. The helper reads the same files under
the same locks and sends back only the count and the plan.

The plan is computed for the trigger threshold before the trigger decides: one round trip, not two.

After a cut inside the current turn, every prompt of the turn shows that turn's user input again
(read back from its chunk) while it fits under the trigger: a survey counts it as part of the hot
window, and a plan leaves room for it, or each pass would leave the prompt over the trigger.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
import msgspec

from aiden import offload
from aiden.config import Config
from aiden.errors import AidenError
from aiden.events import SessionEvent
from aiden.policy.cutpoints import (
    CompactionPlan,
    SkipCompaction,
    compacted_turn_start,
    plan_compaction,
    shows_compacted_input,
)
from aiden.policy.tokens import TokenCalibration, TokenProfile, apply_calibration, estimate_event_tokens
from aiden.storage.chunks import ChunkIndex
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore, Snapshot
from aiden.storage.session import FileSessionStore

__all__ = ["PlanJob", "Planned", "Planner", "Survey", "TokenCounts", "run_job"]

OFFLOAD_BYTES: Final = 1 << 20
"""A hot window of at least this many bytes (~5k events) is surveyed in the helper process when its
store offers a root for that (:meth:`~aiden.storage.protocol.SessionStore.survey_root`: the plain file store)."""

_ROOTS: Final = 2
"""Roots whose decoded hot window the helper process keeps between passes."""


class TokenCounts:
    """Per-event estimates, remembered per event object across passes.

    A store's snapshot hands back the same (immutable) event objects for lines
    it decoded before, so a backlog drain estimates each event once, not once
    per pass. An entry holds its event, so the id cannot be reused meanwhile.
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[SessionEvent, int]] = {}

    def of(
        self, events: Sequence[SessionEvent], profile: TokenProfile, calibration: TokenCalibration | None
    ) -> list[int]:
        """The planning estimate of each event, corrected by ``calibration`` when given."""
        old: dict[int, tuple[SessionEvent, int]] = self._known
        fresh: dict[int, tuple[SessionEvent, int]] = {}
        counts: list[int] = []
        for event in events:
            hit = old.get(id(event))
            n = hit[1] if hit is not None and hit[0] is event else estimate_event_tokens(event, profile)
            fresh[id(event)] = (event, n)
            counts.append(n)
        self._known = fresh
        return [apply_calibration(c, calibration) for c in counts] if calibration is not None else counts


class PlanJob(msgspec.Struct, frozen=True, kw_only=True):
    """A survey of the file store at ``root`` (a job of the helper process)."""

    root: str
    config: Config
    target_tokens: int
    profile: TokenProfile
    calibration: TokenCalibration | None


class Planned(msgspec.Struct, frozen=True, kw_only=True):
    """The helper's answer: the hot window's size and the cut (``plan`` or why not, ``skip``).

    ``plan.retained`` is sent empty: it is the rest of the hot window (as large
    as the window) and nothing after planning reads it.
    """

    event_count: int
    index_last_seq: int
    tokens: int | None = None
    """The hot window's calibrated estimate (the trigger's prompt size without other data)."""
    plan: CompactionPlan | None = None
    skip: SkipCompaction | None = None


@dataclass(frozen=True, slots=True)
class Survey:
    """One pass's view of the hot window: its size now, its cut on demand (see :meth:`Planner.survey`)."""

    event_count: int
    index: ChunkIndex
    plan: Callable[[], Awaitable[CompactionPlan | SkipCompaction]]
    """The cut for the target the survey was made for (computed here unless the helper did)."""
    tokens: int | None = None


class Planner:
    """Surveys the hot window of ``store`` for the scheduler, here or in the helper process."""

    _INLINE_EVENTS: Final = 2000
    """Above this many hot events, a survey made here plans in a worker thread, not on the loop."""

    def __init__(self, store: SessionStore, config: Config, profile: TokenProfile) -> None:
        self._store = store
        self._config = config
        self._profile = profile
        self._counts = TokenCounts()
        self._shown = _ShownInput()

    async def survey(self, target: int, calibration: TokenCalibration | None) -> Survey:
        """Count the hot window's events and prepare its cut for ``target`` tokens."""
        found = await anyio.to_thread.run_sync(self._root_or_snapshot)
        if isinstance(found, str):
            there = await self._survey_there(found, target, calibration)
            if there is not None:
                return there
            found = await anyio.to_thread.run_sync(self._read)
        snap, shown = found
        counts = self._counts.of(snap.events, self._profile, calibration)  # cached per event
        tokens = sum(counts) + _shown_tokens(shown, snap.events, target, self._profile, calibration)
        return Survey(
            len(snap.events),
            snap.index,
            lambda: self._plan_here(snap.events, shown, target, calibration),
            tokens,
        )

    def _root_or_snapshot(self) -> str | tuple[Snapshot, SessionEvent | None]:
        """Where the helper process can survey the hot window, else this process's read (one thread hop)."""
        root = self._store.survey_root(OFFLOAD_BYTES)
        return root if root is not None else self._read()

    def _read(self) -> tuple[Snapshot, SessionEvent | None]:
        """The hot window and index, with the compacted current input prompts show again."""
        snap = self._store.snapshot()
        return snap, self._shown.of(self._store, snap.events, snap.index)

    async def _survey_there(
        self, root: str, target: int, calibration: TokenCalibration | None
    ) -> Survey | None:
        """The helper process's survey of the file store at ``root``; None to survey it here instead."""
        job = PlanJob(
            root=root,
            config=self._config,
            target_tokens=target,
            profile=self._profile,
            calibration=calibration,
        )
        try:
            done = _planned.decode(await offload.run_job("plan", _encoder.encode(job)))
        except offload.OffloadUnavailable:
            return None
        index = await anyio.to_thread.run_sync(self._store.load_index)
        planned = done.plan or done.skip
        # Under the compaction lock the index cannot move between the helper's read and
        # ours; if it did (a survey without the lock), the cut is made here instead.
        if planned is None or done.index_last_seq != index.last_seq:
            return None
        return Survey(done.event_count, index, lambda: _ready(planned), done.tokens)

    async def _plan_here(
        self,
        events: Sequence[SessionEvent],
        shown: SessionEvent | None,
        target: int,
        calibration: TokenCalibration | None,
    ) -> CompactionPlan | SkipCompaction:
        """:func:`plan_compaction` in this process: inline for an ordinary window, else in a worker thread."""

        def plan_now() -> CompactionPlan | SkipCompaction:
            counts = self._counts.of(events, self._profile, calibration)
            return _plan(events, shown, counts, self._config, target, self._profile, calibration)

        # Planning an ordinary hot window stays on the loop: in a worker thread its GIL
        # contention with the writer's thread hop made appends during compaction far slower.
        if len(events) > self._INLINE_EVENTS:
            return await anyio.to_thread.run_sync(plan_now)
        return plan_now()


async def _ready(planned: CompactionPlan | SkipCompaction) -> CompactionPlan | SkipCompaction:
    return planned


class _ShownInput:
    """The current turn's user input that a cut inside its turn compacted and prompts show again,
    read from its chunk once per turn (the prompt reads it back the same way)."""

    def __init__(self) -> None:
        self._read: tuple[tuple[int, str], SessionEvent | None] | None = None  # (seq, chunk id), event

    def of(self, store: SessionStore, hot: Sequence[SessionEvent], index: ChunkIndex) -> SessionEvent | None:
        """That input for the hot window ``hot`` and ``index``; None when the turn's input is hot (or unreadable)."""
        compacted = compacted_turn_start(hot, index.chunks)
        if compacted is None:
            return None
        found = (compacted[0], compacted[1].chunk_id)
        read = self._read
        if read is None or read[0] != found:
            seq, chunk_id = found
            try:
                events = store.read_chunk(chunk_id).events
            except AidenError:  # unreadable: prompts show the turn context instead, as counted
                events = []
            read = self._read = found, next((e for e in events if e.seq == seq and e.type == "user_input"), None)
        return read[1]


def _shown_tokens(
    shown: SessionEvent | None,
    events: Sequence[SessionEvent],
    target: int,
    profile: TokenProfile,
    calibration: TokenCalibration | None,
    compacted: frozenset[int] = frozenset(),
) -> int:
    """What ``shown``, a compacted input, adds to the prompt: its calibrated estimate while prompts
    show it (:func:`shows_compacted_input` of it and the inputs kept before it: ``events`` before it,
    less the ``compacted`` seqs, against the trigger ``target``), else 0."""
    if shown is None:
        return 0
    n = estimate_event_tokens(shown, profile)
    kept = (e for e in events if e.seq < shown.seq and e.seq not in compacted)
    if not shows_compacted_input(sum(estimate_event_tokens(e, profile) for e in kept), n, target):
        return 0
    return apply_calibration(n, calibration) if calibration is not None else n


def _plan(
    events: Sequence[SessionEvent],
    shown: SessionEvent | None,
    counts: Sequence[int],
    config: Config,
    target: int,
    profile: TokenProfile,
    calibration: TokenCalibration | None,
) -> CompactionPlan | SkipCompaction:
    """:func:`plan_compaction` for a hot window under ``target`` with the current turn's input that
    prompts show again: the one already compacted (``shown``), or the one this cut would compact."""
    extra = _shown_tokens(shown, events, target, profile, calibration)
    plan = plan_compaction(events, config, target_tokens=max(1, target - extra), token_counts=counts)
    if extra or isinstance(plan, SkipCompaction) or not plan.cut_meta.is_split_turn:
        return plan
    start = plan.cut_meta.turn_start_seq
    cut = next((e for e in plan.turn_prefix if e.seq == start and e.type == "user_input"), None)
    compacted = frozenset(e.seq for e in plan.compacted)
    extra = _shown_tokens(cut, events, target, profile, calibration, compacted)
    if not extra:
        return plan
    return plan_compaction(events, config, target_tokens=max(1, target - extra), token_counts=counts)


_encoder = msgspec.msgpack.Encoder()
_planned = msgspec.msgpack.Decoder(Planned)
_jobs = msgspec.msgpack.Decoder(PlanJob)


class _Root:
    """What the helper keeps of one root between passes: its store (decoded lines) and estimates."""

    def __init__(self, root: str, config: Config) -> None:
        self.config = config
        self.store = FileSessionStore(Layout(Path(root)), Storage(), config)
        self.counts = TokenCounts()
        self.shown = _ShownInput()


_roots: OrderedDict[str, _Root] = OrderedDict()


def run_job(payload: bytes) -> bytes:
    """The helper process's entry: survey the root of an encoded :class:`PlanJob`, an encoded :class:`Planned` out."""
    job = _jobs.decode(payload)
    kept = _roots.pop(job.root, None)
    if kept is not None and kept.config != job.config:
        kept.store.close()
        kept = None
    here = kept or _Root(job.root, job.config)
    _roots[job.root] = here
    while len(_roots) > _ROOTS:
        _roots.popitem(last=False)[1].store.close()
    snap = here.store.snapshot()
    counts = here.counts.of(snap.events, job.profile, job.calibration)
    shown = here.shown.of(here.store, snap.events, snap.index)
    target = job.target_tokens
    plan = _plan(snap.events, shown, counts, job.config, target, job.profile, job.calibration)
    done = Planned(
        event_count=len(snap.events),
        index_last_seq=snap.index.last_seq,
        tokens=sum(counts) + _shown_tokens(shown, snap.events, target, job.profile, job.calibration),
        plan=None if isinstance(plan, SkipCompaction) else msgspec.structs.replace(plan, retained=()),
        skip=plan if isinstance(plan, SkipCompaction) else None,
    )
    return _encoder.encode(done)
