"""The embedded experience learner (issue #21): lessons from one finished episode, only with direct evidence.

Pure and deterministic: plain data in (the episode, the records already kept
for its environment), plain data out (the records to create or replace, the
environment profile). Every timestamp comes from the episode itself, so
processing an episode again — a worker retried after a crash — yields the
very same records with the very same ids, and merging them changes nothing.

The rules, each citing the episode id and the seqs of the events it rests on:

* a tool call that failed, then a *different* call of the same tool that
  succeeded (and no user correction right after it) teaches a ``failure``
  record (what failed, the error) and a ``procedure`` record (what worked);
* a newer working procedure for the same environment and goal supersedes
  the other procedures of that goal: they become ``legacy``;
* an active procedure whose step fails in a later episode of its environment
  (and does not succeed in it) becomes ``disputed``; an active failure whose
  step now succeeds, likewise; a disputed procedure whose step works again is
  active again;
* a procedure whose step simply works again gains the episode as evidence.

Automatic learning writes no preference, profile or rule entries (those come
only from the memory tools): it makes ``procedure`` and ``failure`` records.

What to learn is decided here alone. A configured LLM may only *phrase* the
lessons of a :class:`LessonGroup` (one working step and the failures it
replaced): :func:`rephrased` puts its text in the records' bodies and keeps
the exact steps and the verification hint beside it, so the ids, statuses and
evidence stay the embedded learner's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from aiden.experience.episodes import Episode, EpisodeEvent, Outcome
from aiden.experience.records import (
    MAX_TASKS,
    EnvironmentProfile,
    Evidence,
    ExperienceRecord,
    goal_key,
    record_id,
)
from aiden.policy.lessons import LessonGroup, Lessons, rephrased
from aiden.policy.toolresult import reported_failure

__all__ = [
    "Attempt",
    "LessonGroup",
    "Lessons",
    "assess",
    "attempts",
    "learn",
    "rephrased",
    "result_failed",
    "should_learn",
    "step_signature",
]

_MAX_STEP_CHARS = 300
_MAX_QUOTE_CHARS = 400
# The first line of a tool output that reports a failure by itself (shells, Python, git, HTTP clients).
_FAILED_FIRST_LINE = re.compile(
    r"^(?:error\b|fatal\b|traceback \(most recent call last\)|exception\b|failed\b|failure\b"
    r"|(?:\S+: )+command not found|permission denied|exit (?:code|status) [1-9])",
    re.IGNORECASE,
)


def should_learn(last_activity: float | None, now: float, idle_minutes: float, run_active: bool) -> bool:
    """The common idle window: no run active and no event for ``idle_minutes`` (0 disables).

    An empty session (``last_activity`` None) is idle: episodes committed before a
    rotation are learned from even if the new session never starts.
    """
    if idle_minutes <= 0 or run_active:
        return False
    return last_activity is None or now - last_activity >= idle_minutes * 60.0


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
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and len(parsed) == 1 and isinstance(next(iter(parsed.values())), str):
        text = " ".join(str(next(iter(parsed.values()))).split())
    elif parsed is not None:
        text = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{tool_name} {text}".strip()[:_MAX_STEP_CHARS]


def attempts(episode: Episode) -> list[Attempt]:
    """The episode's calls paired with their results (by call id, else the next result of that tool)."""
    open_calls: list[EpisodeEvent] = []
    out: list[Attempt] = []
    for event in episode.events:
        if event.type == "tool_call":
            open_calls.append(event)
        elif event.type == "tool_result":
            match = next(
                (c for c in open_calls if event.tool_call_id and c.tool_call_id == event.tool_call_id), None
            )
            if match is None:
                match = next(
                    (
                        c
                        for c in open_calls
                        if c.tool_name == event.tool_name and (not event.tool_call_id or not c.tool_call_id)
                    ),
                    None,
                )
            if match is not None:
                open_calls.remove(match)
                out.append(Attempt(match, event, step_signature(match.tool_name or "", match.content)))
    return out


def assess(episode: Episode) -> Outcome:
    """Goal completion judged from the trace alone: the last attempt's result, unless the user corrected it."""
    tried = attempts(episode)
    if not tried:
        return "unknown"
    last = tried[-1]
    corrected = any(e.type == "user_correction" and e.seq > last.result.seq for e in episode.events)
    if corrected:
        return "unknown"
    return "success" if last.ok else "failure"


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_QUOTE_CHARS else flat[:_MAX_QUOTE_CHARS] + " ..."


def _corrected_after(episode: Episode, attempt: Attempt, tried: list[Attempt]) -> bool:
    """A user correction between this attempt's result and the next call contradicts it."""
    later = [a.call.seq for a in tried if a.call.seq > attempt.result.seq]
    end = min(later) if later else None
    return any(
        e.type == "user_correction" and e.seq > attempt.result.seq and (end is None or e.seq < end)
        for e in episode.events
    )


def _merge(old: ExperienceRecord | None, new: ExperienceRecord) -> ExperienceRecord:
    if old is None:
        return new
    cited = {e.episode_id for e in old.evidence}
    evidence = old.evidence + tuple(e for e in new.evidence if e.episode_id not in cited)
    tasks = (*old.tasks, *(t for t in new.tasks if t not in old.tasks))[-MAX_TASKS:]
    return msgspec.structs.replace(
        new,
        created_at=old.created_at,
        evidence=evidence,
        tasks=tasks,
        updated_at=max(old.updated_at, new.updated_at),
        expires_at=None
        if old.expires_at is None and new.expires_at is None
        else max(old.expires_at or 0.0, new.expires_at or 0.0),
    )


def _point_failures_at_the_new_fix(
    known: Mapping[str, ExperienceRecord],
    current: Callable[[str], ExperienceRecord | None],
    put: Callable[[ExperienceRecord], None],
    env: str,
    goal: str,
    superseded: Sequence[str],
    new_step: str,
    episode_id: str,
) -> None:
    """A failure whose "what worked instead" names a superseded procedure now names the new fix
    (the failure itself still holds; only its advice went stale)."""
    for rid in list(known):
        rec = current(rid)
        if rec is None or rec.kind != "failure" or rec.environment != env or rec.goal != goal:
            continue
        for old in superseded:
            tail = f"What worked instead: `{old}`."
            if rec.status == "active" and rec.body.endswith(tail):
                body = f"{rec.body[: -len(tail)]}What works instead now: `{new_step}` (episode {episode_id})."
                put(msgspec.structs.replace(rec, body=body))
                break


def learn(episode: Episode, existing: Sequence[ExperienceRecord], *, ttl_s: float | None = None) -> Lessons:
    """The lessons of ``episode`` given the ``existing`` records of its environment (any status)."""
    when = episode.finished_at
    expires = None if ttl_s is None else when + ttl_s
    goal = goal_key(episode.goal)
    env = episode.environment
    known = {r.id: r for r in existing}
    changed: dict[str, ExperienceRecord] = {}

    def current(rid: str) -> ExperienceRecord | None:
        return changed.get(rid, known.get(rid))

    def put(record: ExperienceRecord) -> None:
        merged = _merge(current(record.id), record)
        if merged != known.get(record.id):
            changed[record.id] = merged
        else:
            changed.pop(record.id, None)

    def restatus(record: ExperienceRecord, status: str, reason: str) -> None:
        # Every caller checked that the status changes.
        changed[record.id] = msgspec.structs.replace(
            record, status=status, status_reason=reason, updated_at=max(record.updated_at, when)
        )

    tried = attempts(episode)
    failed = {a.step for a in tried if not a.ok}
    worked = {a.step for a in tried if a.ok}
    short_goal = episode.goal[:120]
    fixes: list[tuple[Attempt, Attempt]] = []
    for fail in (a for a in tried if not a.ok):
        fix = next(
            (
                a
                for a in tried
                if a.call.seq > fail.result.seq
                and a.ok
                and a.call.tool_name == fail.call.tool_name
                and a.step != fail.step
            ),
            None,
        )
        if fix is not None and fix.step not in failed and not _corrected_after(episode, fix, tried):
            fixes.append((fail, fix))
    new_procedures: set[str] = set()
    by_fix: dict[str, tuple[Attempt, list[Attempt]]] = {}
    for fail, fix in fixes:
        by_fix.setdefault(fix.step, (fix, []))[1].append(fail)
    for fail, fix in fixes:
        cite = (Evidence(episode_id=episode.id, seqs=(*fail.seqs, *fix.seqs)),)
        put(
            ExperienceRecord(
                id=record_id("failure", env, goal, fail.step),
                kind="failure",
                status="active",
                title=f"{short_goal}: `{fail.step}` fails",
                goal=goal,
                step=fail.step,
                environment=env,
                body=(
                    f"For '{episode.goal}', `{fail.step}` failed with: {_quote(fail.result.content)}\n\n"
                    f"What worked instead: `{fix.step}`."
                ),
                evidence=cite,
                created_at=when,
                updated_at=when,
                expires_at=expires,
                tasks=(episode.goal,),
            )
        )
        pid = record_id("procedure", env, goal, fix.step)
        new_procedures.add(pid)
        put(
            ExperienceRecord(
                id=pid,
                kind="procedure",
                status="active",
                title=f"{short_goal}: `{fix.step}`",
                goal=goal,
                step=fix.step,
                environment=env,
                body=(
                    f"For '{episode.goal}', `{fix.step}` worked (output: {_quote(fix.result.content)}) "
                    f"after `{fail.step}` failed. Verify against current observations before relying on it."
                ),
                evidence=cite,
                created_at=when,
                updated_at=when,
                expires_at=expires,
                tasks=(episode.goal,),
            )
        )
    superseded: list[str] = []
    for record in list(known.values()):
        rec = current(record.id) or record
        if rec.environment != env or rec.id in new_procedures:
            continue
        steps = [a for a in tried if a.step == rec.step]
        seqs = tuple(s for a in steps for s in a.seqs)
        if rec.kind == "procedure" and rec.status != "legacy" and rec.goal == goal and new_procedures:
            restatus(rec, "legacy", f"superseded by {sorted(new_procedures)[0]} (episode {episode.id})")
            superseded.append(rec.step)
        elif (
            rec.kind == "procedure"
            and rec.step in failed
            and rec.step not in worked
            and rec.status == "active"
        ):
            restatus(rec, "disputed", f"episode {episode.id} seqs {list(seqs)}: the step failed")
        elif (
            rec.kind == "failure" and rec.step in worked and rec.step not in failed and rec.status == "active"
        ):
            restatus(rec, "disputed", f"episode {episode.id} seqs {list(seqs)}: the step succeeded")
        elif (
            rec.kind == "procedure"
            and rec.status != "legacy"
            and rec.step in worked
            and rec.step not in failed
        ):
            # Confirmed (a disputed one is active again); a legacy procedure stays superseded.
            put(
                msgspec.structs.replace(
                    rec,
                    status="active",
                    status_reason="" if rec.status == "disputed" else rec.status_reason,
                    evidence=(Evidence(episode_id=episode.id, seqs=seqs),),
                    updated_at=when,
                    expires_at=expires,
                    tasks=(episode.goal,),
                )
            )
    if superseded:
        _point_failures_at_the_new_fix(
            known, current, put, env, goal, superseded, next(iter(by_fix)), episode.id
        )
    observations = {e.key: e.content[:500] for e in episode.events if e.type == "observation" and e.key}
    profile = (
        EnvironmentProfile(environment=env, observations=observations, episode_id=episode.id, updated_at=when)
        if observations
        else None
    )
    ordered = tuple(changed[k] for k in sorted(changed))
    groups: list[LessonGroup] = []
    for fix, fails in by_fix.values():
        pid = record_id("procedure", env, goal, fix.step)
        fids = tuple(dict.fromkeys(record_id("failure", env, goal, f.step) for f in fails))
        if pid in changed or any(f in changed for f in fids):
            groups.append(
                LessonGroup(
                    procedure_id=pid,
                    failure_ids=tuple(f for f in fids if f in changed),
                    goal=episode.goal,
                    environment=env,
                    episode_id=episode.id,
                    step=fix.step,
                    output=_quote(fix.result.content),
                    failed=tuple(dict.fromkeys((f.step, _quote(f.result.content)) for f in fails)),
                )
            )
    return Lessons(records=ordered, profile=profile, assessed=assess(episode), groups=tuple(groups))
