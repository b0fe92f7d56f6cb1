"""Experience memory as an extension of an open memory (entry point ``aiden.extensions: experience``).

:class:`~aiden.experience.service.ExperienceService` serves the actor's inbox. Learning runs in the
common idle window (:func:`~aiden.experience.learner.should_learn`).
:class:`ExperienceMethods` (a base class of ``Memory``) owns the run's open episode. The
``recall_experience`` tool returns at most five records and about 4,800 characters of JSON; bad
arguments become ``{"error": "..."}``: the handler never raises for the model's input.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, get_args

import anyio
import msgspec
from anyio.abc import TaskGroup

from aiden.actors.mailbox import Link, by_request_id
from aiden.errors import AidenError, ClosedError, InvalidEventError, StorageError
from aiden.events import SessionEvent
from aiden.experience.episodes import Episode, EpisodeTracker, environment_name
from aiden.experience.learner import should_learn
from aiden.experience.messages import ExperienceInbox, ExperienceOutbox, ExperiencePort, LearnOutcome
from aiden.experience.records import RECORD_KINDS, ExperienceRecord, RecordKind
from aiden.experience.service import ExperienceService, learner_for, select_experience
from aiden.extension import Extension, MemoryParts, in_background
from aiden.intake import check_text
from aiden.lifecycle import Outcome
from aiden.longterm.autocompact import IdleTarget, recent_activity, run_autocompact
from aiden.memory_core import CoreMemory
from aiden.tools import ToolArgumentError as _Reject
from aiden.tools import ToolSet, decode_arguments, error_result

__all__ = [
    "EXPERIENCE_TOOL",
    "ExperienceExtension",
    "ExperienceMethods",
    "IdleLearning",
    "LEARN_BATCH",
    "MAX_CHARS",
    "MAX_RESULTS",
    "RECHECK_TICKS",
    "TOOL_NAME",
    "ToolAnswer",
    "fit",
    "handle_experience_tool",
]

_log = logging.getLogger("aiden.experience")

LEARN_BATCH = 16
"""Episodes one idle learning pass processes (the rest wait for the next tick)."""
RECHECK_TICKS = 10
"""After a pass that left nothing pending, idle checks skipped before the episode index is read again."""


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

        Reads happen only when they can change the answer: after a pass that left nothing pending,
        the next waits for this memory's next append or :data:`RECHECK_TICKS` checks (an episode
        another worker committed).
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
        # Drained when nothing is left that a pass can take now: episodes still pending after a pass
        # that took none (missing files, or another worker learning) wait like an empty queue. A
        # batch set aside whole was taken: the episodes behind it are learned at the next tick.
        took = outcome.episodes + outcome.set_aside
        self._seen = (last, appends, outcome.pending == 0 or took == 0)
        self.passes += 1
        for problem in outcome.problems:
            _log.error("experience learning: %s", problem)
        return outcome.episodes > 0


# How often the idle-learning task checks whether the session is idle (the AutoCompact tick).
_LEARN_TICK_S = 60.0
# Finished episodes whose commit failed, retried at the next commit (oldest dropped past this).
_MAX_UNSENT: Final = 8


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
        service = ExperienceService(
            p.layout, p.storage, p.config, learner=self._learner, embedder=p.embedder, backends=self._backends
        )
        await tg.start(partial(service.serve, self._link.inbox, self._link.outbox))
        await tg.start(self._link.route, by_request_id(self._link.client))
        if p.config.experience and p.config.idle_compact_after_minutes > 0:
            learning = IdleLearning(memory, self._port, p.config.idle_compact_after_minutes)
            await tg.start(in_background(partial(run_autocompact, learning.check, _LEARN_TICK_S)))

    def stopped(self) -> None:
        """Nothing of its own to close: the runtime closed its link (the actor's streams) just before."""

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
        # One sender at a time: two tasks ending runs at once would both commit the first unsent
        # episode, then both pop it (the second pop an episode never committed).
        self._sending = anyio.Lock()
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
        if outcome not in get_args(Outcome):
            raise InvalidEventError(f"outcome must be one of {get_args(Outcome)}, got {outcome!r}")
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
        async with self._sending:
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
        if isinstance(environment, str):
            environment = environment_name(environment)  # as episodes store it
        return await self._port().records(environment)

    def _tool_sets(self) -> list[ToolSet]:
        mine = [_ExperienceTools(self._experience_tool)] if self._config.experience else []
        return [*super()._tool_sets(), *mine]

    async def _experience_tool(self, arguments: str | Mapping[str, Any]) -> str:
        port = self._port()
        env = self._episodes.environment if self._episodes is not None else None
        answer = await handle_experience_tool(
            arguments,
            search=lambda query, where, kinds, k: port.search(query, where, kinds, k, now=time.time()),
            environment=env if env is not None else environment_name(self._config.experience_environment),
        )
        if self._episodes is not None:
            self._episodes.note_recalled(answer.ids)
        return answer.text


# --- the recall_experience tool ------------------------------------------------------------------

TOOL_NAME: Final = "recall_experience"
MAX_RESULTS: Final = 5
MAX_CHARS: Final = 4800
_MAX_ARGUMENT_CHARS: Final = 16_384
_MAX_QUERY_CHARS: Final = 2_000
_MIN_BODY_CHARS: Final = 120
_HINT: Final = "Experience from earlier runs: a hint to verify against current observations, not state."

EXPERIENCE_TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Look up what earlier runs learned by doing in this environment: procedures that worked, "
            "calibrated values, failures to avoid, facts observed, where things are (navigation: the "
            "path or URL of something an earlier run had to search for), each citing the episode and "
            "events that showed it. Call it when the task materially depends on how something was done "
            "before (a build flag, a working command, a known error, a version, where a file is). "
            "Recalled experience is a hint to verify against current observations and tool results, "
            "not state: the environment may have changed since."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you are trying to do, in words."},
                "environment": {
                    "type": "string",
                    "description": "The environment (repo, service, app) the task runs in, if known.",
                },
                "kinds": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(RECORD_KINDS)},
                    "description": "Only records of these kinds.",
                },
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "description": f"Maximum number of records (at most {MAX_RESULTS}).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}
"""OpenAI / litellm function-tool definition of ``recall_experience``."""


class _ExperienceTools:
    """``recall_experience`` as a :class:`~aiden.tools.ToolSet`: ``run`` notes the recalled records on the episode."""

    schemas: Final = (EXPERIENCE_TOOL,)

    def __init__(self, run: Callable[[str | Mapping[str, Any]], Awaitable[str]]) -> None:
        self._run = run

    def handles(self, name: str) -> bool:
        return name == TOOL_NAME

    async def run(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        return await self._run(arguments)


class _Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    query: str
    environment: str | None = None
    kinds: list[RecordKind] | None = None
    k: int | None = None


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """The JSON text for the model and the ids of the records it holds."""

    text: str
    ids: list[str]


Search = Callable[[str, str | None, list[str] | None, int], Awaitable[list[ExperienceRecord]]]
"""``search(query, environment, kinds, k)``: the best active, unexpired, applicable records."""

_decoder: Final = msgspec.json.Decoder(_Args)
_encoder: Final = msgspec.json.Encoder()


def _parse(arguments: str | Mapping[str, Any]) -> _Args:
    args = decode_arguments(
        arguments,
        _decoder,
        max_chars=_MAX_ARGUMENT_CHARS,
        empty="arguments must be a JSON object with 'query'",
    )
    if not args.query.strip():
        raise _Reject("query must not be empty")
    if len(args.query) > _MAX_QUERY_CHARS:
        raise _Reject(f"query longer than {_MAX_QUERY_CHARS} characters")
    if args.k is not None and not 1 <= args.k <= MAX_RESULTS:
        raise _Reject(f"k must be between 1 and {MAX_RESULTS}, got {args.k}")
    if args.environment is not None and len(args.environment) > 200:
        raise _Reject("environment longer than 200 characters")
    return args


def _dumps(value: Any) -> str:
    return _encoder.encode(value).decode("utf-8")


def _item(record: ExperienceRecord, body: str) -> dict[str, Any]:
    return {
        "id": record.id,
        "kind": record.kind,
        "title": record.title,
        "body": body,
        "environment": record.environment,
        "evidence": [{"episode_id": e.episode_id, "seqs": list(e.seqs)} for e in record.evidence[-3:]],
        "learned_at": record.updated_at,
    }


def fit(records: list[ExperienceRecord], k: int) -> ToolAnswer:
    """The answer for ``records`` (best first): at most ``k`` of them and :data:`MAX_CHARS` of JSON.

    A record that does not fit whole gets its body cut (if at least a useful
    part fits); after that, nothing more is added.
    """
    items: list[dict[str, Any]] = []
    ids: list[str] = []

    def text() -> str:
        return _dumps({"note": _HINT, "results": items})

    for record in records[:k]:
        items.append(_item(record, record.body))
        if len(text()) <= MAX_CHARS:
            ids.append(record.id)
            continue
        items.pop()
        room = MAX_CHARS - len(text()) - len(_dumps(_item(record, ""))) - 8
        if room >= _MIN_BODY_CHARS:
            body = record.body[:room]
            items.append(_item(record, body + " ..."))
            while len(text()) > MAX_CHARS and len(body) > _MIN_BODY_CHARS:
                # Escapes (quotes, non-ASCII) make the JSON longer than the raw body.
                body = body[: len(body) - max(16, (len(text()) - MAX_CHARS))]
                items[-1] = _item(record, body + " ...")
            if len(text()) <= MAX_CHARS:
                ids.append(record.id)
            else:
                items.pop()
        break
    return ToolAnswer(text(), ids)


async def handle_experience_tool(
    arguments: str | Mapping[str, Any],
    *,
    search: Search,
    environment: str | None = None,
) -> ToolAnswer:
    """Run one ``recall_experience`` call; the JSON text and the ids of the records returned.

    ``environment`` is the run's environment, used when the model names none.
    Neither naming one ("" or None) searches every environment: the task's
    environment is unknown, not "none".
    """
    try:
        args = _parse(arguments)
        k = args.k or MAX_RESULTS
        kinds = None if args.kinds is None else [str(kind) for kind in args.kinds]
        # Normalized as episodes store it: " acme\n" finds the records of "acme".
        env = environment_name(args.environment or "") or environment_name(environment or "") or None
        found = await search(args.query, env, kinds, k)
        return fit(found, k)
    except msgspec.ValidationError as exc:
        return ToolAnswer(error_result(f"invalid arguments: {exc}"), [])
    except msgspec.DecodeError as exc:
        return ToolAnswer(error_result(f"arguments are not valid JSON: {exc}"), [])
    except (AidenError, ValueError, msgspec.MsgspecError) as exc:
        return ToolAnswer(error_result(str(exc) or type(exc).__name__), [])
