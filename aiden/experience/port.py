"""The caller side of the experience actor: one method per request.

Held by ``Memory`` (episode commits, the ``recall_experience`` tool,
inspection, an explicit learning pass) and the runtime's idle-learning task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from aiden.actors.mailbox import Client
from aiden.experience.episodes import Episode
from aiden.experience.messages import (
    CommitEpisode,
    EpisodeCommitted,
    ExperienceInbox,
    ExperienceOutbox,
    Found,
    Learn,
    Learned,
    LearnOutcome,
    ListRecords,
    Records,
    SearchRecords,
)
from aiden.experience.records import ExperienceRecord
from aiden.observe import observed
from aiden.ports import expect_reply

__all__ = ["ExperiencePort"]

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
                Found,
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
