"""The experience actor: its messages (one request union, one reply union), its port and its room.

:class:`ExperiencePort` is the caller side, held by ``Memory`` and the idle-learning task. Episodes
and records travel as the frozen Structs they are stored as. :class:`ExperienceService` is the room:
the episode and record stores and the learning pass (blocking, run in worker threads), and
:meth:`~ExperienceService.serve`, one worker, so two learning passes never interleave. Learning is
at-least-once and idempotent: an episode is marked ``processed`` only after the records it taught
are committed, and the pure learner gives the same records the same ids when it runs again. The LLM
learner is called back on the event loop (:func:`anyio.from_thread.run`), so the service must run
in an anyio worker thread.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, TypeVar

import anyio
import msgspec
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import Client, serve
from aiden.config import Config
from aiden.errors import CorruptionError, StorageError
from aiden.experience.episodes import Episode
from aiden.experience.episodestore import EpisodeBackend, EpisodeStore
from aiden.experience.learner import Lessons, learn, rephrased
from aiden.experience.records import ExperienceRecord, terms_of
from aiden.experience.recordstore import RecordBackend, RecordStore
from aiden.messages import Failed, codec
from aiden.observe import observed
from aiden.ports import expect_reply
from aiden.recall.embedding import Embedder
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import SessionStore

if TYPE_CHECKING:
    # Imported for real only when an LLM summarizer exists: litellm's package stays unloaded.
    from aiden.experience.llmlearner import LLMLearner

__all__ = [
    "CommitEpisode",
    "EpisodeCommitted",
    "ExperienceInbox",
    "ExperienceOutbox",
    "ExperiencePort",
    "ExperienceService",
    "Learn",
    "Learned",
    "LearnOutcome",
    "LearnerStats",
    "ListRecords",
    "Records",
    "SearchRecords",
    "select_experience",
]

log = logging.getLogger("aiden.experience")


class CommitEpisode(msgspec.Struct, frozen=True, tag=True):
    """Persist a finished episode (idempotent by its id) and note it for learning."""

    request_id: int
    episode: Episode


class SearchRecords(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """The ``k`` best active, unexpired, applicable records for ``query`` at ``now``."""

    request_id: int
    query: str
    environment: str | None
    kinds: list[str] | None
    k: int
    now: float


class Learn(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """Process up to ``limit`` committed episodes not learned from yet, oldest first."""

    request_id: int
    limit: int


class ListRecords(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """Every record (any status), for inspection; never what a normal recall sees."""

    request_id: int
    environment: str | None = None


ExperienceInbox = CommitEpisode | SearchRecords | Learn | ListRecords


class EpisodeCommitted(msgspec.Struct, frozen=True, tag=True):
    """``committed`` False: an episode with this id was already committed (nothing written)."""

    request_id: int
    committed: bool


class LearnerStats(msgspec.Struct, frozen=True, kw_only=True):
    """What the LLM learner did since the memory opened (``malformed``: the fallbacks for an unusable answer)."""

    groups: int = 0
    calls: int = 0
    phrased: int = 0
    fallbacks: int = 0
    malformed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    first_error: str = ""
    last_error: str = ""


class LearnOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What one learning pass did.

    ``records`` are the ids created or changed (status changes included);
    ``pending`` the committed episodes still waiting after this pass;
    ``set_aside`` the episodes this pass set aside (each in ``problems``);
    ``problems`` what went wrong: an episode whose file is missing stays pending; one past the read
    limit or that does not decode, or whose lessons could not be learned or written, is set aside
    (marked processed, never retried);
    ``learner`` the LLM learner's counters so far (None: embedded learning only).
    """

    episodes: int = 0
    records: tuple[str, ...] = ()
    disputed: tuple[str, ...] = ()
    legacy: tuple[str, ...] = ()
    pending: int = 0
    set_aside: int = 0
    problems: tuple[str, ...] = ()
    learner: LearnerStats | None = None


class Learned(msgspec.Struct, frozen=True, tag=True):
    """A learning pass finished."""

    request_id: int
    outcome: LearnOutcome


class Records(msgspec.Struct, frozen=True, tag=True):
    """The records a search returned (best first) or every record listed (oldest first)."""

    request_id: int
    records: list[ExperienceRecord]


ExperienceOutbox = EpisodeCommitted | Learned | Records | Failed


R = TypeVar("R")


class ExperiencePort:
    """Requests to the experience actor."""

    __slots__ = ("_client",)

    def __init__(self, client: Client[ExperienceInbox, ExperienceOutbox]) -> None:
        self._client = client

    async def _ask(self, build: Callable[[int], ExperienceInbox], kind: type[R]) -> R:
        return expect_reply(await self._client.call(build), kind)

    async def commit(self, episode: Episode) -> bool:
        """Persist a finished episode; False if it was already committed (a safe retry)."""
        return (await self._ask(lambda rid: CommitEpisode(rid, episode), EpisodeCommitted)).committed

    @observed("search_experience")
    async def search(
        self, query: str, environment: str | None, kinds: list[str] | None, k: int, *, now: float
    ) -> list[ExperienceRecord]:
        """The ``k`` best active, unexpired, applicable records for ``query``."""
        return (
            await self._ask(
                lambda rid: SearchRecords(
                    request_id=rid, query=query, environment=environment, kinds=kinds, k=k, now=now
                ),
                Records,
            )
        ).records

    @observed("learn")
    async def learn(self, limit: int) -> LearnOutcome:
        """Learn from up to ``limit`` committed episodes not processed yet."""
        return (await self._ask(lambda rid: Learn(request_id=rid, limit=limit), Learned)).outcome

    async def records(self, environment: str | None = None) -> list[ExperienceRecord]:
        """Every record of ``environment`` (None: all), any status, oldest first."""
        return (
            await self._ask(lambda rid: ListRecords(request_id=rid, environment=environment), Records)
        ).records


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
