"""Experience memory as an extension of an open memory (entry point ``aiden.extensions: experience``).

Its actor stores the episodes ``Memory`` records around runs and learns records from them (also
while the session is idle); ``Memory`` reaches it through :class:`ExperiencePort` and records the
current run with an :class:`EpisodeTracker`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from anyio.abc import TaskGroup

from aiden.actors.experience import ExperienceActor, IdleLearning
from aiden.actors.mailbox import Link, by_request_id
from aiden.experience.episodes import EpisodeTracker
from aiden.experience.messages import ExperienceInbox, ExperienceOutbox, ExperiencePort
from aiden.experience.service import ExperienceService, learner_for, select_experience
from aiden.extension import Extension, MemoryParts, in_background
from aiden.longterm.autocompact import run_autocompact
from aiden.memory_core import CoreMemory
from aiden.memory_experience import ExperienceMethods

__all__ = ["ExperienceExtension"]

# How often the idle-learning task checks whether the session is idle (the AutoCompact tick).
_LEARN_TICK_S = 60.0


class ExperienceExtension(Extension):
    """Experience memory of one open memory (an :class:`~aiden.extension.Extension`)."""

    def __init__(self, parts: MemoryParts) -> None:
        self._parts = parts
        self._link: Link[ExperienceInbox, ExperienceOutbox, ExperienceOutbox] = Link(
            "experience memory", ExperienceInbox, ExperienceOutbox, parts.queue_size, doorbell=parts.doorbell
        )
        self._port = ExperiencePort(self._link.client)
        # An LLM summarizer's model also words the learned lessons (one call per lesson group).
        self._learner = learner_for(parts.summarizer)
        self._backends = select_experience(parts.session_store, parts.layout, parts.storage, parts.embedder)
        config = parts.config
        self._episodes = EpisodeTracker(config.experience_environment) if config.experience else None
        self._actor: ExperienceActor | None = None

    @property
    def links(self) -> Sequence[Link[Any, Any, Any]]:
        return (self._link,)

    @property
    def ports(self) -> Mapping[str, Any]:
        return {"experience": self._port, "episodes": self._episodes}

    @property
    def idle(self) -> bool:
        return True  # a learning pass in flight is a request its caller waits for

    async def start(self, tg: TaskGroup, memory: CoreMemory) -> None:
        p = self._parts
        self._actor = actor = ExperienceActor(
            ExperienceService(
                p.layout, p.storage, p.config, learner=self._learner, embedder=p.embedder, backends=self._backends
            ),
            self._link.inbox,
            self._link.outbox,
        )
        await tg.start(actor.run)
        await tg.start(self._link.route, by_request_id(self._link.client))
        if p.config.experience and p.config.idle_compact_after_minutes > 0:
            learning = IdleLearning(memory, self._port, p.config.idle_compact_after_minutes)
            await tg.start(in_background(partial(run_autocompact, learning.check, _LEARN_TICK_S)))

    def stopped(self) -> None:
        # A parked memory keeps no actor (nor the streams and files it holds).
        actor, self._actor = self._actor, None
        if actor is not None:
            actor.close_streams()

    async def closing(self, memory: CoreMemory) -> None:
        # A memory made without experience's methods (the core alone) records no episode.
        if isinstance(memory, ExperienceMethods) and memory.episode_id is not None:
            # A run the caller never committed still taught something: keep its trace.
            await memory.commit_episode("unknown", "memory closed during the run")
