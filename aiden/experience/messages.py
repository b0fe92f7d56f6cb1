"""The experience actor's surface: its messages (one request union, one reply union) and its port.

:class:`ExperiencePort` is the caller side, held by ``Memory`` and the idle-learning task. Episodes
and records travel as the frozen Structs they are stored as.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from aiden.actors.mailbox import Client
from aiden.experience.episodes import Episode
from aiden.experience.records import ExperienceRecord
from aiden.messages import Failed
from aiden.observe import observed
from aiden.ports import expect_reply

__all__ = [
    "CommitEpisode",
    "EpisodeCommitted",
    "ExperienceInbox",
    "ExperienceOutbox",
    "ExperiencePort",
    "Learn",
    "Learned",
    "LearnOutcome",
    "LearnerStats",
    "ListRecords",
    "Records",
    "SearchRecords",
]


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
