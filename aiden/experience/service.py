"""The experience room's operations: the episode and record stores and the learning pass (blocking).

Run by the experience actor in worker threads. Learning is at-least-once and idempotent: an episode
is marked ``processed`` only after the records it taught are committed, and the pure learner gives
the same records the same ids when it runs again. The LLM learner is called back on the event loop
(:func:`anyio.from_thread.run`), so the service must run in an anyio worker thread.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import anyio

from aiden.config import Config
from aiden.experience.episodes import Episode
from aiden.experience.episodestore import EpisodeBackend, EpisodeStore
from aiden.experience.learner import Lessons, learn, rephrased
from aiden.experience.messages import LearnerStats, LearnOutcome
from aiden.experience.records import ExperienceRecord, terms_of
from aiden.experience.recordstore import RecordBackend, RecordStore
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
        """Learn from up to ``limit`` pending episodes, oldest first; what changed."""
        pending = self.episodes.pending()
        learned: list[ExperienceRecord] = []
        problems: list[str] = []
        done = 0
        for row in pending[:limit]:
            episode = self.episodes.load(row)
            if episode is None:
                # Damaged beyond reading: reported, and marked so it does not block every later pass.
                problems.append(f"episode {row.id} is missing or unreadable")
                self.episodes.mark_processed(row, {"skipped": "unreadable"})
                continue
            # Records expired when the episode ended are left unread, as recall leaves them: a lesson
            # learned again replaces its expired record under the same id.
            existing = self.records.records(environment=episode.environment, now=episode.finished_at)
            lessons = learn(episode, existing, ttl_s=self._ttl_s)
            lessons = self._phrased(lessons)
            self.records.apply(lessons.records)
            if lessons.profile is not None:
                self.records.save_profile(lessons.profile)
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
            pending=max(0, len(pending) - limit),
            problems=tuple(problems),
            learner=self.learner_stats(),
        )

    def all_records(self, environment: str | None = None) -> list[ExperienceRecord]:
        """Every record of ``environment`` (None: all), any status."""
        return self.records.records(environment=environment)


def select_experience(
    store: SessionStore, layout: Layout, storage: Storage, embedder: Embedder | None
) -> tuple[EpisodeBackend, RecordBackend] | None:
    """Experience memory's backends for a memory on ``store``; None: the files under its root."""
    module = sys.modules.get("aiden.storage.postgres.store")
    if module is None or not isinstance(store, module.PostgresSessionStore):
        return None
    from aiden.experience.postgres import experience_backends

    return experience_backends(store, layout, storage, embedder)
