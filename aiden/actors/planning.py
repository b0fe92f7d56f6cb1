"""The scheduler's survey of the hot window: how many events it holds, and where a pass would cut it.

Both are linear in the whole hot window. An ordinary window is surveyed here; a file store's
large window in the helper process (:mod:`aiden.offload`), as a backlog's survey in a worker
thread would hold this process's GIL while appends wait. The helper reads the same files under
the same locks and sends back only the count and the plan.

The plan is computed for the trigger threshold before the trigger decides: one round trip, not two.
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
from aiden.events import SessionEvent
from aiden.policy.cutpoints import CompactionPlan, SkipCompaction, plan_compaction
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

    async def survey(self, target: int, calibration: TokenCalibration | None) -> Survey:
        """Count the hot window's events and prepare its cut for ``target`` tokens."""
        found = await anyio.to_thread.run_sync(self._root_or_snapshot)
        if isinstance(found, str):
            there = await self._survey_there(found, target, calibration)
            if there is not None:
                return there
            found = await anyio.to_thread.run_sync(self._store.snapshot)
        snap = found
        tokens = sum(self._counts.of(snap.events, self._profile, calibration))  # cached per event
        return Survey(
            len(snap.events), snap.index, lambda: self._plan_here(snap.events, target, calibration), tokens
        )

    def _root_or_snapshot(self) -> str | Snapshot:
        """Where the helper process can survey the hot window, else this process's snapshot (one thread hop)."""
        root = self._store.survey_root(OFFLOAD_BYTES)
        return root if root is not None else self._store.snapshot()

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
        self, events: Sequence[SessionEvent], target: int, calibration: TokenCalibration | None
    ) -> CompactionPlan | SkipCompaction:
        """:func:`plan_compaction` in this process: inline for an ordinary window, else in a worker thread."""

        def plan_now() -> CompactionPlan | SkipCompaction:
            counts = self._counts.of(events, self._profile, calibration)
            return plan_compaction(events, self._config, target_tokens=target, token_counts=counts)

        # Planning an ordinary hot window stays on the loop: in a worker thread its GIL
        # contention with the writer's thread hop made appends during compaction far slower.
        if len(events) > self._INLINE_EVENTS:
            return await anyio.to_thread.run_sync(plan_now)
        return plan_now()


async def _ready(planned: CompactionPlan | SkipCompaction) -> CompactionPlan | SkipCompaction:
    return planned


_encoder = msgspec.msgpack.Encoder()
_planned = msgspec.msgpack.Decoder(Planned)
_jobs = msgspec.msgpack.Decoder(PlanJob)


class _Root:
    """What the helper keeps of one root between passes: its store (decoded lines) and estimates."""

    def __init__(self, root: str, config: Config) -> None:
        self.config = config
        self.store = FileSessionStore(Layout(Path(root)), Storage(), config)
        self.counts = TokenCounts()


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
    plan = plan_compaction(snap.events, job.config, target_tokens=job.target_tokens, token_counts=counts)
    done = Planned(
        event_count=len(snap.events),
        index_last_seq=snap.index.last_seq,
        tokens=sum(counts),
        plan=None if isinstance(plan, SkipCompaction) else msgspec.structs.replace(plan, retained=()),
        skip=plan if isinstance(plan, SkipCompaction) else None,
    )
    return _encoder.encode(done)
