"""Experience memory as an extension of an open memory (entry point ``aiden.extensions: experience``).

Its actor stores the episodes ``Memory`` records around runs and learns records from them (also
while the session is idle); ``Memory`` reaches it through :class:`ExperiencePort` and records the
current run with an :class:`EpisodeTracker`.

Its methods on :class:`~aiden.memory.Memory` are here too: :class:`ExperienceMethods`, a base
class of ``Memory`` over :class:`~aiden.memory_core.CoreMemory` (seed 002's Memory Plane). It
owns the run's open episode (an :class:`~aiden.experience.episodes.EpisodeTracker`) and forwards
everything else to the experience actor's port. Experience is never injected into a prompt: the
model asks with ``recall_experience``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from anyio.abc import TaskGroup

from aiden.actors.experience import ExperienceActor, IdleLearning
from aiden.actors.mailbox import Link, by_request_id
from aiden.errors import AidenError, ClosedError, InvalidEventError, StorageError
from aiden.events import SessionEvent
from aiden.experience.episodes import Episode, EpisodeTracker
from aiden.experience.messages import ExperienceInbox, ExperienceOutbox, ExperiencePort
from aiden.experience.service import ExperienceService, learner_for, select_experience
from aiden.extension import Extension, MemoryParts, in_background
from aiden.intake import check_text
from aiden.lifecycle import Outcome
from aiden.longterm.autocompact import run_autocompact
from aiden.memory_core import CoreMemory
from aiden.tools import ToolSet

if TYPE_CHECKING:
    from aiden.experience.messages import LearnOutcome
    from aiden.experience.records import ExperienceRecord

__all__ = ["ExperienceExtension", "ExperienceMethods"]

# How often the idle-learning task checks whether the session is idle (the AutoCompact tick).
_LEARN_TICK_S = 60.0
_log = logging.getLogger("aiden.experience")
# Finished episodes whose commit failed, retried at the next commit (oldest dropped past this).
_MAX_UNSENT: Final = 8
_OUTCOMES: Final = ("success", "failure", "unknown")


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

class ExperienceMethods(CoreMemory):
    """Episode recording and experience recall of an open memory (a base class of :class:`~aiden.memory.Memory`)."""

    def __init__(
        self, *, experience: ExperiencePort | None = None, episodes: EpisodeTracker | None = None, **core: Any
    ) -> None:
        super().__init__(**core)
        self._experience = experience
        self._episodes = episodes
        self._unsent: list[Episode] = []
        self._episodes_quarantined = 0

    def _port(self) -> ExperiencePort:
        if self._experience is None:
            raise ClosedError("experience memory is not available")
        return self._experience

    @property
    def episode_id(self) -> str | None:
        """The id of the episode being recorded (the current run's), None between runs."""
        return self._episodes.episode_id if self._episodes is not None else None

    def observe(self, key: str, value: str) -> bool:
        """Record a deterministic observation of the environment (a version, a path, a size) on the episode.

        Observations form the environment's profile, kept apart from learned
        lessons. False when no episode is open (no run, or experience off).
        """
        self._check_open()
        if not isinstance(key, str) or not key.strip() or not isinstance(value, str):
            raise InvalidEventError("observe(key, value): key must be a non-empty string and value a string")
        check_text("observe key", key)
        check_text("observe value", value)
        return self._episodes is not None and self._episodes.observe(key.strip(), value, now=time.time())

    async def commit_episode(self, outcome: Outcome = "unknown", note: str = "") -> str | None:
        """Finish the open episode with the caller's ``outcome`` and ``note`` and commit it; its id.

        ``commit_run`` does this for you (``outcome=`` there). Success and failure
        both feed learning, which runs in the idle window (or :meth:`learn_experience`).
        None when no episode was open. A commit that fails (disk full) is logged
        and retried with the next commit; the session log is unaffected.
        """
        self._check_open()
        if outcome not in _OUTCOMES:
            raise InvalidEventError(f"outcome must be one of {_OUTCOMES}, got {outcome!r}")
        if not isinstance(note, str):
            raise InvalidEventError(f"note must be a string, got {type(note).__name__}")
        check_text("note", note)
        episode = (
            self._episodes.finish(outcome, note, now=time.time()) if self._episodes is not None else None
        )
        if episode is not None:
            self._unsent.append(episode)
        await self._send_episodes()
        return episode.id if episode is not None else None

    async def _run_began(self, root: SessionEvent, environment: str | None) -> None:
        await super()._run_began(root, environment)
        if self._episodes is None:
            return
        if environment is not None and (not isinstance(environment, str) or len(environment) > 200):
            raise InvalidEventError("environment must be a string of at most 200 characters")
        left = self._episodes.begin(root, environment=environment, now=time.time())
        if left is not None:
            self._unsent.append(left)
            await self._send_episodes()

    async def _run_ended(self, outcome: Outcome, note: str) -> None:
        await super()._run_ended(outcome, note)
        await self.commit_episode(outcome, note)

    def _set_aside(self) -> int:
        return super()._set_aside() + self._episodes_quarantined

    def _appended(self, events: list[SessionEvent]) -> None:
        super()._appended(events)
        if self._episodes is not None:
            self._episodes.note(events)

    async def _send_episodes(self) -> None:
        port = self._experience
        if port is None:
            return
        while self._unsent:
            try:
                await port.commit(self._unsent[0])
            except (StorageError, ClosedError) as exc:
                _log.error("could not commit episode %s (kept, retried later): %s", self._unsent[0].id, exc)
                del self._unsent[:-_MAX_UNSENT]
                return
            except AidenError as exc:
                # Not the disk: this episode itself cannot be committed. Retrying it would block
                # every later episode behind it, so it is set aside and counted.
                self._episodes_quarantined += 1
                _log.error("episode %s cannot be committed and is dropped: %s", self._unsent[0].id, exc)
            self._unsent.pop(0)

    async def learn_experience(self, limit: int = 16) -> LearnOutcome:
        """Learn from up to ``limit`` committed episodes now, instead of waiting for the idle window."""
        self._check_open()
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidEventError(f"limit must be a positive int, got {limit!r}")
        return await self._port().learn(limit)

    async def experience_records(self, environment: str | None = None) -> list[ExperienceRecord]:
        """Every learned record (any status, oldest first), for inspection; ``recall_experience`` is the agent's way."""
        self._check_open()
        return await self._port().records(environment)

    def _tool_sets(self) -> list[ToolSet]:
        # ``recall_experience`` when experience memory is on.
        mine = [_ExperienceTools(self._experience_tool)] if self._config.experience else []
        return [*super()._tool_sets(), *mine]

    async def _experience_tool(self, arguments: str | Mapping[str, Any]) -> str:
        from aiden.experience.tool import handle_experience_tool

        port = self._port()

        async def search(
            query: str, env: str | None, kinds: list[str] | None, k: int
        ) -> list[ExperienceRecord]:
            return await port.search(query, env, kinds, k, now=time.time())

        env = self._episodes.environment if self._episodes is not None else None
        answer = await handle_experience_tool(
            arguments,
            search=search,
            environment=env if env is not None else self._config.experience_environment,
        )
        if self._episodes is not None:
            self._episodes.note_recalled(answer.ids)
        return answer.text


class _ExperienceTools:
    """``recall_experience`` as a :class:`~aiden.tools.ToolSet`: ``run`` notes the recalled records on the episode."""

    def __init__(self, run: Callable[[str | Mapping[str, Any]], Awaitable[str]]) -> None:
        self._run = run

    @property
    def schemas(self) -> Sequence[Mapping[str, Any]]:
        from aiden.experience.tool import EXPERIENCE_TOOL

        return (EXPERIENCE_TOOL,)

    def handles(self, name: str) -> bool:
        return name == "recall_experience"

    async def run(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        return await self._run(arguments)
