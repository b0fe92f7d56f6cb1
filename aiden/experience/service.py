"""The experience room: the episode and record stores and the learning pass (blocking), and the actor
serving them (:meth:`ExperienceService.serve`: one worker, so two learning passes never interleave).

The blocking operations run in worker threads. Learning is at-least-once and idempotent: an episode
is marked ``processed`` only after the records it taught are committed, and the pure learner gives
the same records the same ids when it runs again. The LLM learner is called back on the event loop
(:func:`anyio.from_thread.run`), so the service must run in an anyio worker thread.
"""

from __future__ import annotations

import logging
import sys
import time
from functools import partial
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import serve
from aiden.config import Config
from aiden.errors import CorruptionError, StorageError
from aiden.experience.episodes import Episode
from aiden.experience.episodestore import EpisodeBackend, EpisodeStore
from aiden.experience.learner import Lessons, learn, rephrased
from aiden.experience.messages import (
    CommitEpisode,
    EpisodeCommitted,
    ExperienceInbox,
    ExperienceOutbox,
    Learn,
    Learned,
    LearnerStats,
    LearnOutcome,
    ListRecords,
    Records,
    SearchRecords,
)
from aiden.experience.records import ExperienceRecord, terms_of
from aiden.experience.recordstore import RecordBackend, RecordStore
from aiden.messages import codec
from aiden.recall.embedding import Embedder
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore

if TYPE_CHECKING:
    # Imported for real only when an LLM summarizer exists: litellm's package stays unloaded.
    from aiden.experience.llmlearner import LLMLearner

__all__ = ["ExperienceService", "select_experience"]

log = logging.getLogger("aiden.experience")


def learner_for(summarizer: object) -> LLMLearner | None:
    """The LLM learner for ``summarizer`` when it is a LiteLLMSummarizer (same model), else None."""
    # A LiteLLMSummarizer exists only once its module was imported: no need to import it to check.
    if "aiden.summarizers.llm.summarizer" not in sys.modules:
        return None
    from aiden.experience.llmlearner import LLMLearner

    return LLMLearner.from_summarizer(summarizer)


class ExperienceService:
    """Episodes, records and learning for one memory; blocking, one caller thread at a time per method.

    ``backends`` (episodes, records) replaces the files under the memory's root.
    """

    def __init__(
        self,
        layout: Layout,
        storage: Storage,
        config: Config,
        *,
        learner: LLMLearner | None = None,
        embedder: Embedder | None = None,
        backends: tuple[EpisodeBackend, RecordBackend] | None = None,
    ) -> None:
        self.episodes: EpisodeBackend
        self.records: RecordBackend
        self.episodes, self.records = backends or (
            EpisodeStore(layout, storage, lock_timeout_s=config.lock_timeout_s),
            RecordStore(layout, storage, lock_timeout_s=config.lock_timeout_s, embedder=embedder),
        )
        days = config.experience_ttl_days
        self._ttl_s = days * 86_400.0 if days > 0 else None
        self.learner = learner

    def learner_stats(self) -> LearnerStats | None:
        """The LLM learner's counters, None when learning is embedded only."""
        return self.learner.stats() if self.learner is not None else None

    def _phrased(self, lessons: Lessons) -> Lessons:
        """``lessons`` worded by the LLM learner, one call per group (embedded text on any failure)."""
        if self.learner is None:
            return lessons
        for group in lessons.groups:
            phrasing = anyio.from_thread.run(self.learner.phrase_or_none, group)
            if phrasing is not None:
                lessons = rephrased(lessons, group, phrasing.procedure, phrasing.failure)
        return lessons

    def commit(self, episode: Episode, *, now: float) -> bool:
        """Persist ``episode``; False if its id was already committed (a retry)."""
        return self.episodes.commit(episode, now=now)

    def search(
        self, query: str, environment: str | None, kinds: list[str] | None, k: int, *, now: float
    ) -> list[ExperienceRecord]:
        """The ``k`` best active, unexpired, applicable records for ``query`` (hybrid with an embedder)."""
        return self.records.search(
            terms_of(query), now=now, k=k, environment=environment, kinds=kinds, query=query
        )

    def learn(self, limit: int) -> LearnOutcome:
        """Learn from up to ``limit`` pending episodes, oldest first; what changed.

        One pass at a time per root (or PostgreSQL namespace): while another worker's pass holds
        the learning lock, nothing is learned here (``episodes`` 0, ``pending`` counted) and its
        episodes are left to it.
        """
        with self.records.learning() as held:
            if held:
                return self._learn(limit)
        # Not a problem: workers sharing a namespace all go idle, and one of them learning is enough.
        return LearnOutcome(pending=len(self.episodes.pending()), learner=self.learner_stats())

    def _learn(self, limit: int) -> LearnOutcome:
        # Under the learning lock: the records read and the records applied are one pass's, so a
        # lesson another worker superseded meanwhile is never written back over it.
        pending = self.episodes.pending()
        learned: list[ExperienceRecord] = []
        problems: list[str] = []
        done = 0
        taken = 0  # episodes learned or set aside: the batch, marked processed
        for row in pending:
            if taken >= limit:
                break
            try:
                episode = self.episodes.load(row)
            except CorruptionError as exc:
                # Damaged for good: reported, and set aside so it does not come back every pass.
                problems.append(f"episode {row.id} is unreadable and was set aside: {exc}")
                self.episodes.mark_processed(row, {"skipped": "unreadable"})
                taken += 1
                continue
            if episode is None:
                # Its folder may be restored, so it stays pending; outside the batch, so that a run of
                # them at the head of the queue does not stop learning from the episodes behind.
                problems.append(f"episode {row.id} is missing; it stays pending")
                continue
            taken += 1
            try:
                lessons = self._lessons(episode)
            except (StorageError, OSError, anyio.RunFinishedError):
                raise  # the store or the memory, not this episode: the next pass retries it
            except Exception as exc:
                # Something in this episode (or a bug it triggers): retried, it would fail again and
                # block every later episode behind it, so it is set aside and reported.
                log.exception("experience: learning from episode %s failed; it is set aside", row.id)
                detail = f"{type(exc).__name__}: {exc}"[:300]
                problems.append(f"episode {row.id} could not be learned from and was set aside: {detail}")
                self.episodes.mark_processed(row, {"skipped": detail})
                continue
            self.episodes.mark_processed(
                row, {"assessed": lessons.assessed, "records": [r.id for r in lessons.records]}
            )
            done += 1
            learned.extend(lessons.records)
        if done:
            self.records.save_vectors()
        return LearnOutcome(
            episodes=done,
            records=tuple(dict.fromkeys(r.id for r in learned)),
            disputed=tuple(dict.fromkeys(r.id for r in learned if r.status == "disputed")),
            legacy=tuple(dict.fromkeys(r.id for r in learned if r.status == "legacy")),
            pending=len(pending) - taken,
            set_aside=taken - done,
            problems=tuple(problems),
            learner=self.learner_stats(),
        )

    def _lessons(self, episode: Episode) -> Lessons:
        """Learn from ``episode`` and commit what it taught; the lessons."""
        # Records expired when the episode ended are left unread, as recall leaves them: a lesson
        # learned again replaces its expired record under the same id.
        existing = self.records.records(environment=episode.environment, now=episode.finished_at)
        lessons = self._phrased(learn(episode, existing, ttl_s=self._ttl_s))
        self.records.apply(lessons.records)
        if lessons.profile is not None:
            self.records.save_profile(lessons.profile)
        return lessons

    def all_records(self, environment: str | None = None) -> list[ExperienceRecord]:
        """Every record of ``environment`` (None: all), any status."""
        return self.records.records(environment=environment)

    async def serve(
        self,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve the experience actor's requests until ``inbox`` closes, each in a worker thread."""
        task_status.started()
        await serve("experience", inbox, outbox, codec(ExperienceInbox), codec(ExperienceOutbox), self._serve)

    async def _serve(self, msg: ExperienceInbox) -> ExperienceOutbox:
        match msg:
            case CommitEpisode(request_id=rid, episode=episode):
                done = await anyio.to_thread.run_sync(partial(self.commit, episode, now=time.time()))
                return EpisodeCommitted(rid, done)
            case SearchRecords(request_id=rid, query=q, environment=env, kinds=kinds, k=k, now=now):
                found = await anyio.to_thread.run_sync(partial(self.search, q, env, kinds, k, now=now))
                return Records(rid, found)
            case Learn(request_id=rid, limit=limit):
                return Learned(rid, await anyio.to_thread.run_sync(self.learn, limit))
            case ListRecords(request_id=rid, environment=env):
                return Records(rid, await anyio.to_thread.run_sync(self.all_records, env))


def select_experience(
    store: SessionStore, layout: Layout, storage: Storage, embedder: Embedder | None
) -> tuple[EpisodeBackend, RecordBackend] | None:
    """Experience memory's backends for a memory on ``store``; None: the files under its root."""
    module = sys.modules.get("aiden.storage.postgres.store")
    if module is None or not isinstance(store, module.PostgresSessionStore):
        return None
    from aiden.experience.postgres import experience_backends

    return experience_backends(store, layout, storage, embedder)
