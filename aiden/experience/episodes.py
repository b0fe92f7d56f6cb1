"""Episodes: one run's trace of tool use, corrections and outcome; how it is recorded and read (pure).

The recorder numbers events gap-free from 1 and scrubs screenshots and credentials (a lesson
outlives its session and is copied into later runs). aiden's own memory tools are left out of the
trace: a lesson is about the environment, not about recalling. :func:`assess` is the worker's own
judgement of goal completion; the caller's recorded outcome is evidence beside it, never a
substitute.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from aiden.errors import InvalidEventError
from aiden.events import Seq, SessionEvent, retracted_seqs, validate_id
from aiden.lifecycle import Outcome
from aiden.policy.scrub import redact_secrets, strip_screenshot_data
from aiden.policy.toolresult import NONZERO_EXIT, OS_REFUSAL, reported_failure
from aiden.recall.query import STOPWORDS
from aiden.summarizers.mustkeep.classify import says_correction
from aiden.summarizers.mustkeep.text import split_sentences

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_EPISODE_EVENTS",
    "MAX_EVENTS_BYTES",
    "MAX_EVENT_CHARS",
    "MEMORY_TOOLS",
    "Attempt",
    "Episode",
    "EpisodeEvent",
    "EpisodeEventType",
    "EpisodeRecorder",
    "EpisodeTracker",
    "answer_after",
    "assess",
    "attempts",
    "corrected_after",
    "environment_name",
    "goal_key",
    "same_environment",
    "new_episode_id",
    "numbers_changed",
    "result_failed",
    "step_signature",
    "terms_of",
]

EpisodeEventType = Literal["tool_call", "tool_result", "user_correction", "observation", "assistant_output"]
MAX_EVENT_CHARS: Final = 16_000
"""A content longer than this is cut (tool outputs can be huge; the lesson needs the start)."""
MAX_ANSWER_CHARS: Final = 1_000
"""An assistant output keeps its start only: the learner needs to know the run answered, not the essay."""
MAX_EPISODE_EVENTS: Final = 5_000
"""Events one episode keeps; later ones are counted in ``Episode.dropped`` instead."""
MAX_EVENTS_BYTES: Final = 6 * 1024 * 1024
"""The encoded size of one episode's events, kept under the episode store's read limit: past it the
oldest tool outputs are cut to their start (what a lesson quotes), then later events are dropped."""
_CUT_OUTPUT_CHARS: Final = 1_000
_GOAL_CHARS: Final = 2_000
_STATEMENT_CHARS: Final = 256_000  # what keys a task statement: the rest of a longer one is data, not the task
MAX_TERMS: Final = 48
"""Search terms kept per record in the index (bounded so the index stays small)."""
_KEY_TERMS: Final = 32
_WORD: Final = re.compile(r"[^\W_]+(?:[-_.][^\W_]+)*", re.UNICODE)


def terms_of(text: str, limit: int = MAX_TERMS) -> tuple[str, ...]:
    """The distinct content words of ``text``, case-folded, in order of first appearance; words joined
    by ``-``, ``_`` or ``.`` (``build.sh``) are kept whole *and* split, so either form matches."""
    out: dict[str, None] = {}
    for match in _WORD.finditer(text.casefold()):
        word = match.group(0)
        parts = [word, *re.split(r"[-_.]", word)] if any(c in word for c in "-_.") else [word]
        for part in parts:
            if len(part) > 1 and part not in STOPWORDS:
                out.setdefault(part, None)
        if len(out) >= limit:
            break
    return tuple(out)[:limit]


def goal_key(statement: str) -> str:
    """The identity of a task statement: its content words, sorted and joined (two phrasings of one
    task meet). A statement of more than 32 of them keys as its first 32 and a digest of them all:
    an agent that puts the same instructions or demonstration before every task states different
    tasks, and only the whole statement tells them apart."""
    terms = terms_of(statement, len(statement) + 1)  # every word: no statement has more than characters
    if len(terms) <= _KEY_TERMS:
        return " ".join(sorted(terms))
    digest = hashlib.sha256(" ".join(sorted(terms)).encode("utf-8")).hexdigest()[:16]
    return f"{' '.join(sorted(terms[:_KEY_TERMS]))} #{digest}"


class EpisodeEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One event of an episode.

    ``tool_call``: ``tool_name`` and its JSON ``content`` (the arguments);
    ``tool_result``: ``ok`` False when the call failed, ``content`` the output
    or error; ``user_correction``: the user's text; ``observation``: a
    deterministic fact of the environment, ``key`` = ``content``;
    ``assistant_output``: the agent's text (the start of it), the last one after
    the tool calls being the run's answer.
    """

    seq: Seq
    type: EpisodeEventType
    content: str = ""
    tool_name: str | None = None
    tool_call_id: str | None = None
    ok: bool | None = None
    key: str | None = None
    timestamp: float | None = None


class Episode(msgspec.Struct, frozen=True, kw_only=True):
    """A finished episode as committed to ``memory/episodes/<yyyy>/<episode_id>/episode.json``.

    ``goal`` is the start of the task statement (the run's input and any user message before its
    first answer or tool call, the newest first); ``goal_key`` the :func:`goal_key` of all of it ("" in an
    episode recorded before it was kept: the key of ``goal`` stands for it).
    """

    id: str
    goal: str
    goal_key: str = ""
    environment: str = ""
    started_at: float
    finished_at: float
    outcome: Outcome = "unknown"
    note: str = ""
    events: tuple[EpisodeEvent, ...] = ()
    recalled: tuple[str, ...] = ()
    dropped: int = 0


_event_encoder: Final = msgspec.json.Encoder()


def environment_name(environment: str) -> str:
    """``environment`` as episodes and records store it: whitespace runs (line breaks, U+0085 included)
    as one space, stripped, at most 200 characters. Every entry point normalizes the same way, so
    a name read with a trailing newline still finds its records, and the YAML index keeps it exactly."""
    return " ".join(environment.split())[:200]


def same_environment(a: str, b: str) -> bool:
    """One environment: records stored before names were normalized keep inner whitespace runs."""
    return environment_name(a) == environment_name(b)


def _scrubbed(content: str) -> str:
    if not content:
        return content
    scrubbed = redact_secrets(
        strip_screenshot_data(SessionEvent(type="tool_result", content=content)).content
    )
    return scrubbed if len(scrubbed) <= MAX_EVENT_CHARS else scrubbed[:MAX_EVENT_CHARS] + " [truncated]"


class EpisodeRecorder:
    """Collects one run's events; mutable, owned by the experience actor (never shared)."""

    def __init__(self, episode_id: str, *, goal: str, environment: str = "", started_at: float) -> None:
        self.episode_id = validate_id(episode_id, what="episode id")
        self._statement: list[tuple[int, str]] = [(0, goal)]  # (session seq, message) of the task statement
        self.environment = environment_name(environment)
        self.started_at = started_at
        self._events: list[EpisodeEvent] = []
        self._sources: list[int] = []  # each kept event's session seq (0: not from the session log)
        self._recalled: dict[str, None] = {}
        self._dropped = 0
        self._sizes: list[int] = []  # each kept event's encoded size
        self._bytes = 0
        self._uncut = 0  # events before this index had their output cut (or need none)

    def add(self, event: EpisodeEvent, *, source: Seq = 0) -> int:
        """Append ``event`` (its ``seq`` is replaced by the next one); the seq, or 0 if dropped for size.

        ``source`` is the session seq the event came from, for :meth:`withdraw`.
        """
        if event.type == "observation" and not event.key:
            raise InvalidEventError("an observation needs a key")
        if event.type in ("tool_call", "tool_result") and not event.tool_name:
            raise InvalidEventError(f"a {event.type} needs a tool_name")
        if len(self._events) < MAX_EPISODE_EVENTS:
            seq = len(self._events) + 1
            kept = msgspec.structs.replace(event, seq=seq, content=_scrubbed(event.content))
            size = len(_event_encoder.encode(kept))
            if self._fits(size):
                self._events.append(kept)
                self._sources.append(source)
                self._sizes.append(size)
                self._bytes += size
                return seq
        self._dropped += 1
        return 0

    def restate(self, text: str, *, source: Seq = 0) -> None:
        """Add a user message (from session seq ``source``) to the run's task statement."""
        self._statement.append((source, text))

    def _fits(self, size: int) -> bool:
        """Whether an event of ``size`` bytes fits, after cutting the oldest tool outputs if needed."""
        # A long run's outputs would make an episode too large to read back: their starts are kept.
        while self._bytes + size > MAX_EVENTS_BYTES and self._uncut < len(self._events):
            i, self._uncut = self._uncut, self._uncut + 1
            old = self._events[i]
            if old.type != "tool_result" or len(old.content) <= _CUT_OUTPUT_CHARS:
                continue
            cut = msgspec.structs.replace(old, content=old.content[:_CUT_OUTPUT_CHARS] + " [truncated]")
            new = len(_event_encoder.encode(cut))
            self._events[i], self._bytes, self._sizes[i] = cut, self._bytes - self._sizes[i] + new, new
        return self._bytes + size <= MAX_EVENTS_BYTES

    def _add(self, type_: EpisodeEventType, content: str, *, source: Seq = 0, **fields: Any) -> int:
        return self.add(EpisodeEvent(seq=0, type=type_, content=content, **fields), source=source)

    def withdraw(self, sources: set[int]) -> None:
        """Remove the events that came from the session seqs ``sources`` (retracted), renumbering the rest."""
        # Source 0 (an observation, the run's input) came from no retractable event.
        self._statement = [(src, text) for src, text in self._statement if not src or src not in sources]
        keep = [i for i, src in enumerate(self._sources) if not src or src not in sources]
        if len(keep) == len(self._events):
            return
        self._uncut = sum(1 for i in keep if i < self._uncut)
        self._sources = [self._sources[i] for i in keep]
        self._events = [msgspec.structs.replace(self._events[i], seq=n) for n, i in enumerate(keep, 1)]
        self._sizes = [len(_event_encoder.encode(e)) for e in self._events]
        self._bytes = sum(self._sizes)

    def tool_call(
        self,
        tool_name: str,
        arguments: str,
        *,
        call_id: str | None = None,
        timestamp: float | None = None,
        source: Seq = 0,
    ) -> int:
        """Record a tool call (from session seq ``source``); its seq."""
        return self._add(
            "tool_call", arguments, tool_name=tool_name, tool_call_id=call_id, timestamp=timestamp, source=source
        )

    def tool_result(
        self,
        tool_name: str,
        output: str,
        *,
        ok: bool,
        call_id: str | None = None,
        timestamp: float | None = None,
        source: Seq = 0,
    ) -> int:
        """Record a tool result (``ok`` False: the call failed; from session seq ``source``); its seq."""
        return self._add(
            "tool_result",
            output,
            tool_name=tool_name,
            ok=ok,
            tool_call_id=call_id,
            timestamp=timestamp,
            source=source,
        )

    def correction(self, text: str, *, timestamp: float | None = None, source: Seq = 0) -> int:
        """Record a user correction (from session seq ``source``); its seq."""
        return self._add("user_correction", text, timestamp=timestamp, source=source)

    def answer(self, text: str, *, timestamp: float | None = None, source: Seq = 0) -> int:
        """Record an assistant output (its first :data:`MAX_ANSWER_CHARS` characters; from session seq
        ``source``); its seq."""
        return self._add("assistant_output", text[:MAX_ANSWER_CHARS], timestamp=timestamp, source=source)

    def observe(self, key: str, value: str, *, timestamp: float | None = None) -> int:
        """Record a deterministic observation of the environment (a version, a path, a size); its seq."""
        return self._add("observation", value, key=key[:200], timestamp=timestamp)

    def note_recalled(self, record_ids: list[str]) -> None:
        """Remember the record ids a recall returned (each once)."""
        self._recalled.update(dict.fromkeys(record_ids))

    def finish(self, outcome: Outcome, note: str = "", *, finished_at: float) -> Episode:
        """The frozen episode (the recorder may still be used: finishing twice gives equal episodes)."""
        # The newest message first: a run opened by a demonstration or instructions gets its task
        # in a later message, and a title or a body quotes the statement's start.
        flat = " ".join(" ".join(text for _, text in reversed(self._statement)).split())
        statement = redact_secrets(flat[:_STATEMENT_CHARS])
        return Episode(
            id=self.episode_id,
            goal=statement[:_GOAL_CHARS],
            goal_key=goal_key(statement),
            environment=self.environment,
            started_at=self.started_at,
            finished_at=max(finished_at, self.started_at),
            outcome=outcome,
            note=redact_secrets(note[:2000]),
            events=tuple(self._events),
            recalled=tuple(self._recalled),
            dropped=self._dropped,
        )


_MAX_STEP_CHARS: Final = 300
# The first line of a tool output that reports a failure by itself (shells, Python, git, HTTP clients).
# Anchored at its start: a result that only mentions a refusal or an exit further on did not fail.
_FAILED_FIRST_LINE: Final = re.compile(
    r"^(?:error\b|fatal\b|traceback \(most recent call last\)|exception\b|failed\b|failure\b"
    rf"|(?:\S+: )+command not found|{OS_REFUSAL}|{NONZERO_EXIT})",
    re.IGNORECASE,
)


def result_failed(meta: Mapping[str, Any], content: str) -> bool:
    """True when a tool result reports a failure: in its ``meta`` (``is_error``, ``error``, a
    non-zero ``exit_code``/``returncode``, an HTTP ``status_code`` >= 400, ``status: "error"``)
    or, without such metadata, on its first non-empty line (``error:``, a traceback, ...)."""
    verdict = reported_failure(meta)
    if verdict is not None:
        return verdict
    first = next((line.strip() for line in content[:4000].splitlines() if line.strip()), "")
    return _FAILED_FIRST_LINE.match(first) is not None


@dataclass(frozen=True, slots=True)
class Attempt:
    """A tool call and its result."""

    call: EpisodeEvent
    result: EpisodeEvent
    step: str

    @property
    def ok(self) -> bool:
        """True when the result did not report a failure."""
        return self.result.ok is not False

    @property
    def seqs(self) -> tuple[int, int]:
        """The call's and the result's seqs."""
        return (self.call.seq, self.result.seq)


def step_signature(tool_name: str, arguments: str) -> str:
    """A call's normalized signature: ``tool value`` for one string argument, else ``tool {sorted JSON}``."""
    text = " ".join(arguments.split())
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
        if isinstance(parsed, dict) and len(parsed) == 1 and isinstance(next(iter(parsed.values())), str):
            text = " ".join(str(next(iter(parsed.values()))).split())
        else:
            text = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        pass  # not JSON, or nested too deep to read as JSON: the text itself
    return f"{tool_name} {text}".strip()[:_MAX_STEP_CHARS]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def numbers_changed(before: str, after: str) -> tuple[str, ...]:
    """The argument names whose values differ between two calls' JSON object arguments, when every
    difference is one number for another (a coordinate, a timeout, a size, a count): what a fix
    calibrated. Empty when the calls differ in anything else (a flag, a path, an added argument)."""
    try:
        old, new = json.loads(before), json.loads(after)
        if not isinstance(old, dict) or not isinstance(new, dict) or old.keys() != new.keys():
            return ()
        changed = sorted(str(k) for k in old if old[k] != new[k])
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read (or compare) as JSON
        return ()
    if not changed or not all(_number(old[k]) and _number(new[k]) for k in changed):
        return ()
    return tuple(changed)


def attempts(episode: Episode) -> list[Attempt]:
    """The episode's calls paired with their results (by call id, else the next result of that tool)."""
    open_calls: list[EpisodeEvent] = []
    out: list[Attempt] = []
    for event in episode.events:
        if event.type == "tool_call":
            open_calls.append(event)
        elif event.type == "tool_result":
            cid = event.tool_call_id
            match = next((c for c in open_calls if cid and c.tool_call_id == cid), None) or next(
                (c for c in open_calls if c.tool_name == event.tool_name and not (cid and c.tool_call_id)), None
            )
            if match is not None:
                open_calls.remove(match)
                out.append(Attempt(match, event, step_signature(match.tool_name or "", match.content)))
    return out


def corrected_after(episode: Episode, attempt: Attempt, tried: Sequence[Attempt]) -> bool:
    """A user correction between this attempt's result and the next call contradicts it."""
    end = min((a.call.seq for a in tried if a.call.seq > attempt.result.seq), default=None)
    return any(
        e.type == "user_correction" and e.seq > attempt.result.seq and (end is None or e.seq < end)
        for e in episode.events
    )


def answer_after(episode: Episode, seq: int) -> int | None:
    """The seq of the first assistant output after ``seq`` with no tool call after it: the run's
    answer once its tools were done (None: the run ended without one, e.g. abandoned mid-way)."""
    answer: int | None = None
    for event in episode.events:
        if event.seq <= seq:
            continue
        if event.type == "tool_call":
            answer = None
        elif event.type == "assistant_output" and answer is None:
            answer = event.seq
    return answer


def assess(episode: Episode) -> Outcome:
    """Goal completion judged from the trace alone (the caller's ``outcome`` is not read).

    ``failure``: the last attempt failed; ``success``: it worked, no user
    correction came after it and the run then answered (an assistant output
    after its last tool call); ``unknown`` otherwise: no attempt, a correction,
    or a run that never answered (abandoned, closed during the run).
    """
    tried = attempts(episode)
    if not tried:
        return "unknown"
    last = tried[-1]
    if any(e.type == "user_correction" and e.seq > last.result.seq for e in episode.events):
        return "unknown"
    if not last.ok:
        return "failure"
    return "success" if answer_after(episode, last.result.seq) is not None else "unknown"


MEMORY_TOOLS: Final = frozenset(
    {"recall_session_chunks", "save_memory", "forget_memory", "recall_experience"}
)
"""aiden's own tools, left out of episodes."""
_MAX_CALL_IDS: Final = 4096


def new_episode_id(now: float) -> str:
    """A fresh episode id: ``ep-<ms, hex>-<random>`` (sorts by start time, never collides in practice)."""
    return f"ep-{int(now * 1000):x}-{secrets.token_hex(4)}"


class EpisodeTracker:
    """At most one open episode; every method is synchronous (called on the caller's task)."""

    def __init__(self, default_environment: str = "") -> None:
        self._default_environment = default_environment
        self._recorder: EpisodeRecorder | None = None
        self._root_seq = 0
        self._acting = False  # the open run answered or made a tool call
        self._call_tools: dict[str, str] = {}
        # The session seqs the open episode noted: an append repeating a stored event_id (a retry, an
        # adapter ending its run with the stored answer's id) acknowledges that event again.
        self._noted: set[int] = set()

    @property
    def episode_id(self) -> str | None:
        """The open episode's id (None when none is open)."""
        return self._recorder.episode_id if self._recorder is not None else None

    @property
    def environment(self) -> str | None:
        """The open episode's environment (None when none is open)."""
        return self._recorder.environment if self._recorder is not None else None

    def begin(self, root: SessionEvent, *, environment: str | None, now: float) -> Episode | None:
        """Open an episode for the run whose root input is ``root``.

        An episode still open (a run that never committed) is finished as
        ``unknown`` and returned for the caller to commit.
        """
        left = self.finish("unknown", "superseded by a new run", now=now)
        env = self._default_environment if environment is None else environment
        self._recorder = EpisodeRecorder(
            new_episode_id(now), goal=root.content, environment=env, started_at=root.timestamp or now
        )
        self._root_seq = root.seq
        self._acting = False
        self._noted = {root.seq}
        return left

    def note(self, events: Iterable[SessionEvent]) -> None:
        """Add the appended ``events`` (with their seqs) to the open episode, if any.

        A retraction takes the event it withdraws back out: a lesson outlives the session and must
        not teach what the user took back. Withdrawing the run's root input drops the episode
        (nothing of it is committed or learned: its goal is gone). A user message before the run's
        first answer or tool call joins the task statement; after it, it is a correction. An event noted
        already is not noted again.
        """
        rec = self._recorder
        if rec is None:
            return
        for e in events:
            if e.seq in self._noted:
                continue
            self._noted.add(e.seq)
            if e.type == "system_event" and (withdrawn := retracted_seqs((e,))):
                if self._root_seq in withdrawn:
                    self._recorder, self._call_tools = None, {}
                    return
                rec.withdraw(withdrawn)
            elif e.type == "tool_call":
                self._acting = True
                name = e.tool_name or "tool"
                if e.tool_call_id and len(self._call_tools) < _MAX_CALL_IDS:
                    self._call_tools[e.tool_call_id] = name
                if name not in MEMORY_TOOLS:
                    rec.tool_call(
                        name,
                        e.tool_args or e.content,
                        call_id=e.tool_call_id,
                        timestamp=e.timestamp,
                        source=e.seq,
                    )
            elif e.type == "tool_result":
                name = e.tool_name or self._call_tools.get(e.tool_call_id or "", "tool")
                if name not in MEMORY_TOOLS:
                    rec.tool_result(
                        name,
                        e.content,
                        ok=not result_failed(e.meta, e.content),
                        call_id=e.tool_call_id,
                        timestamp=e.timestamp,
                        source=e.seq,
                    )
            elif e.type == "user_input" and e.seq != self._root_seq and not e.synthetic:
                # Before any answer or tool call a user message states the task (a demonstration or
                # instructions first, the task after), which keys the episode, unless it says it
                # corrects it ("No wait, deploy to production"): a correction the learner weighs.
                if not self._acting and not says_correction(next(iter(split_sentences(e.content)), "")):
                    rec.restate(e.content, source=e.seq)
                else:
                    rec.correction(e.content, timestamp=e.timestamp, source=e.seq)
            elif e.type == "assistant_output" and not e.synthetic:
                self._acting = True
                # The last one after the tool calls is the run's answer: the worker's goal assessment reads it.
                rec.answer(e.content, timestamp=e.timestamp, source=e.seq)

    def observe(self, key: str, value: str, *, now: float) -> bool:
        """Record a deterministic observation of the environment; False when no episode is open."""
        if self._recorder is None:
            return False
        self._recorder.observe(key, value, timestamp=now)
        return True

    def note_recalled(self, record_ids: list[str]) -> None:
        """Remember the record ids a ``recall_experience`` call returned."""
        if self._recorder is not None:
            self._recorder.note_recalled(record_ids)

    def finish(self, outcome: Outcome, note: str = "", *, now: float) -> Episode | None:
        """Close the open episode; the finished episode (None when none was open)."""
        rec, self._recorder = self._recorder, None
        self._call_tools = {}
        if rec is None:
            return None
        return rec.finish(outcome, note, finished_at=now)
