"""The experience actor: owns :class:`~aiden.experience.service.ExperienceService`.

Everything outside the experience room reaches it by messages
(:mod:`aiden.experience.messages`) through an
:class:`~aiden.experience.messages.ExperiencePort`. One worker serves the inbox,
so two learning passes never interleave; the stores' file locks keep two
runtimes on one root apart. Learning runs in the common idle window (the
AutoCompact rule, :func:`~aiden.experience.learner.should_learn`): never while
a run is active, only after the session has been quiet for
``idle_compact_after_minutes``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import assert_never

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import serve
from aiden.experience.learner import should_learn
from aiden.experience.messages import (
    CommitEpisode,
    EpisodeCommitted,
    ExperienceInbox,
    ExperienceOutbox,
    ExperiencePort,
    Found,
    Learn,
    Learned,
    ListRecords,
    Records,
    SearchRecords,
)
from aiden.experience.service import ExperienceService
from aiden.longterm.autocompact import IdleTarget, recent_activity
from aiden.messages import Codec, codec

__all__ = ["LEARN_BATCH", "RECHECK_TICKS", "ExperienceActor", "IdleLearning"]

log = logging.getLogger("aiden.experience")

LEARN_BATCH = 16
"""Episodes one idle learning pass processes (the rest wait for the next tick)."""
RECHECK_TICKS = 10
"""After a pass that left nothing pending, idle checks skipped before the episode index is read again."""


class ExperienceActor:
    """Serves experience requests; run :meth:`run` once."""

    def __init__(
        self,
        service: ExperienceService,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
    ) -> None:
        self._svc = service
        self._inbox = inbox
        self._outbox = outbox
        self._in: Codec[ExperienceInbox] = codec(ExperienceInbox)
        self._out: Codec[ExperienceOutbox] = codec(ExperienceOutbox)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until the inbox closes."""
        task_status.started()
        await serve("experience", self._inbox, self._outbox, self._in, self._out, self._serve)

    async def _serve(self, msg: ExperienceInbox) -> ExperienceOutbox:
        svc = self._svc
        match msg:
            case CommitEpisode(request_id=rid, episode=episode):
                done = await anyio.to_thread.run_sync(partial(svc.commit, episode, now=time.time()))
                return EpisodeCommitted(rid, done)
            case SearchRecords(request_id=rid, query=q, environment=env, kinds=kinds, k=k, now=now):
                found = await anyio.to_thread.run_sync(partial(svc.search, q, env, kinds, k, now=now))
                return Found(rid, found)
            case Learn(request_id=rid, limit=limit):
                return Learned(rid, await anyio.to_thread.run_sync(svc.learn, limit))
            case ListRecords(request_id=rid, environment=env):
                return Records(rid, await anyio.to_thread.run_sync(svc.all_records, env))
            case _:
                assert_never(msg)

    def close_streams(self) -> None:
        """Close both stream ends (a no-op when the serve loop already did)."""
        self._inbox.close()
        self._outbox.close()


class IdleLearning:
    """The idle check for :func:`~aiden.longterm.autocompact.run_autocompact`: learn while nobody waits."""

    def __init__(
        self,
        target: IdleTarget,
        port: ExperiencePort,
        idle_after_minutes: float,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._target = target
        self._port = port
        self._minutes = idle_after_minutes
        self._clock = wall_clock
        # The last activity read and the appends then; whether the pass after it left nothing pending.
        self._seen: tuple[float | None, int, bool] | None = None
        self._skipped = 0
        self.passes = 0

    async def check(self) -> bool:
        """Run one learning pass if the session is idle; True if it processed an episode.

        Reads (the hot window's last activity, the episode index) happen only when they can change
        the answer: a session seen active (or appended to by this memory) less than the idle time ago
        is not idle yet, and after a
        pass that left nothing pending the next read waits for this memory's next append, or for
        :data:`RECHECK_TICKS` checks (an episode committed without an append, another worker's).
        """
        if self._minutes <= 0 or self._target.run_active:
            return False
        now, counts = self._clock(), self._target.stats()
        appends = counts.appends
        seen, appends_then, drained = self._seen if self._seen is not None else (None, -1, False)
        quiet = drained and appends == appends_then and self._skipped < RECHECK_TICKS
        if recent_activity(seen, counts.last_append_at, now, self._minutes) or quiet:
            self._skipped += 1
            return False
        self._skipped = 0
        last = await self._target.last_activity()
        if not should_learn(last, now, self._minutes, self._target.run_active):
            self._seen = (last, appends, False)
            return False
        outcome = await self._port.learn(LEARN_BATCH)
        self._seen = (last, appends, outcome.pending == 0)
        self.passes += 1
        for problem in outcome.problems:
            log.error("experience learning: %s", problem)
        return outcome.episodes > 0
