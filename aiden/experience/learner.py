"""The embedded experience learner: lessons from one finished episode, only with direct evidence.

Pure and deterministic: every timestamp comes from the episode, so processing an episode again (a
worker retried after a crash) yields the same records with the same ids. The rules, each citing the
episode and the seqs it rests on:

* a failed call, then a *different* working call of the same tool (no user correction after it):
  a ``failure`` record and a ``procedure`` (``calibration`` when only numbers changed);
* a run that completed its goal at the first try with one step: a ``procedure`` for that step
  (with several steps, which one did the work is not in the trace);
* each observed key: a ``fact``; a location looked up then used: a ``navigation`` record;
* a newer fix for the same environment and goal (the same words in the whole task statement, see
  :func:`~aiden.experience.records.goal_key`) makes the goal's other procedures ``legacy`` (a
  follow-up such as "go on" or "continue" supersedes nothing; a one-word task such as "deploy" does);
  a working step that now fails (or a failure whose step now works) becomes ``disputed``; a
  working step that works again is confirmed (a disputed one active again).

Automatic learning writes no preference, profile or rule entries. A configured LLM may only
*phrase* a :class:`LessonGroup` (:func:`rephrased`): ids, statuses and evidence stay the learner's.

Navigation records (where things are) come from a lookup and a use. A *lookup* is a call that
worked and whose result names a location ``L`` nothing earlier in the run named (not the goal, no
earlier call's arguments; a bare file name there says what is looked for, not where); a *use* is a
later working call naming ``L``, with no user correction after it.
Together they give "in environment E, <name> is at L". Two spellings are one place when one ends
with the other after a ``/``; the record keeps the use's spelling. A bare word (``src``,
``Makefile``) is too ambiguous to be a location, and a bare file name (``setup.py``, listed at the
root) is no record ("setup.py is at setup.py"), only where a recorded file moved to. Later episodes
confirm, dispute (a not-found error naming the place) or supersede (the same name found elsewhere,
once the old place is shown gone) a record; without that evidence both stay active, since a repo
may hold two files of one name. No model words a navigation record: the location is the lesson.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

import msgspec

from aiden.experience.episodes import (
    Attempt,
    Episode,
    answer_after,
    assess,
    attempts,
    corrected_after,
    numbers_changed,
    same_environment,
)
from aiden.experience.records import (
    EnvironmentProfile,
    ExperienceRecord,
    RecordKind,
    confirmed,
    goal_key,
    merge,
    new_record,
    record_id,
    restatused,
)
from aiden.lifecycle import Outcome

__all__ = [
    "MAX_FACT_VALUE_CHARS",
    "MAX_PLACES",
    "SCAN_CHARS",
    "LessonGroup",
    "Lessons",
    "Place",
    "fact_records",
    "found_places",
    "learn",
    "locations",
    "names_place",
    "navigation_records",
    "not_found",
    "place_name",
    "rephrased",
    "same_place",
    "should_learn",
]


@dataclass(frozen=True, slots=True)
class LessonGroup:
    """One working step and the failed steps it replaced, as an LLM learner may phrase them.

    ``failed`` holds ``(step, quoted error)`` pairs; the ids are the records the phrasing goes into.
    """

    procedure_id: str
    failure_ids: tuple[str, ...]
    goal: str
    environment: str
    episode_id: str
    step: str
    output: str
    failed: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Lessons:
    """What one episode teaches: records to create or replace, the environment profile, the assessment,
    and the newly learned lesson groups (among ``records``) an LLM learner may phrase."""

    records: tuple[ExperienceRecord, ...]
    profile: EnvironmentProfile | None
    assessed: Outcome
    groups: tuple[LessonGroup, ...] = ()


def rephrased(lessons: Lessons, group: LessonGroup, procedure: str, failure: str) -> Lessons:
    """``lessons`` with ``group``'s records phrased by a model: ``procedure`` and ``failure`` texts
    (an empty one leaves those records' embedded text). The exact steps stay in every body
    (recall matches them; the agent must verify them), the source becomes ``llm``."""
    failed_steps = ", ".join(f"`{step}`" for step, _ in group.failed)

    def body(record: ExperienceRecord) -> ExperienceRecord:
        if record.id == group.procedure_id and procedure:
            text = (
                f"{procedure}\n\nStep: `{group.step}` (worked in episode {group.episode_id} after "
                f"{failed_steps} failed). Verify against current observations before relying on it."
            )
        elif record.id in group.failure_ids and failure:
            text = f"{failure}\n\nFailed step: `{record.step}`. What worked instead: `{group.step}`."
        else:
            return record
        return msgspec.structs.replace(record, body=text, source="llm")

    return replace(lessons, records=tuple(body(r) for r in lessons.records))


MAX_FACT_VALUE_CHARS: Final = 500
"""An observed value is kept up to this length (the profile keeps the same)."""
_MAX_REASON_VALUE_CHARS: Final = 120


_MAX_QUOTE_CHARS: Final = 400


def _quote(text: str, limit: int = _MAX_QUOTE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + " ..."


def fact_records(
    episode: Episode, known: Mapping[str, ExperienceRecord], *, expires_at: float | None
) -> list[ExperienceRecord]:
    """The fact records ``episode``'s observations give, merged with the ``known`` ones (by id).

    One record per (environment, key), the episode's last observation winning: the same value adds
    the episode as evidence; a new value replaces the old in place (its status reason says what it
    was), so a key that changes every run does not pile up records. A record equal to its known
    version is still returned; the caller keeps only what changed.
    """
    latest: dict[str, tuple[str, int]] = {}
    for event in episode.events:
        key = " ".join((event.key or "").split())
        if event.type == "observation" and key:
            # Flat, as the record's title line is stored: a value compares equal to what was read back.
            latest[key] = (_quote(event.content, MAX_FACT_VALUE_CHARS), event.seq)
    when = episode.finished_at
    out: list[ExperienceRecord] = []
    for key, (value, seq) in latest.items():
        fresh = new_record(
            episode,
            "fact",
            key,
            " ".join(f"{key}: {value}".split()),
            f"`{key}` was observed as `{value}` (episode {episode.id}). An observation of the "
            "environment at that time: verify it against current observations before relying on it.",
            (seq,),
            expires_at=expires_at,
        )
        old = known.get(fresh.id)
        if old is None:
            out.append(fresh)
        elif old.title == fresh.title:
            # The same value again: the episode joins the evidence; body and reason stay the first's.
            seen = msgspec.structs.replace(
                old, status="active", evidence=fresh.evidence, updated_at=when, expires_at=expires_at
            )
            out.append(merge(old, seen))
        elif when >= old.updated_at:
            # A newer value: the old one's evidence is about the old value, so it goes with it.
            was = _quote(old.title.split(": ", 1)[-1], _MAX_REASON_VALUE_CHARS)
            out.append(
                msgspec.structs.replace(
                    fresh, created_at=old.created_at, status_reason=f"was `{was}` until episode {episode.id}"
                )
            )
    return out


_WORKING: Final = ("procedure", "calibration")
"""The kinds that name a working step (confirmed, disputed and superseded alike)."""
_MIN_SUPERSEDING_GOAL_WORDS: Final = 2
"""Content words a goal needs for a new fix to supersede its other procedures: a follow-up ("go on",
"yes", "try again") names no task, and its runs' unrelated lessons must not replace each other."""
_FOLLOW_UPS: Final = frozenset(
    {"ahead", "carry", "continue", "fix", "fine", "keep", "next", "ok", "okay", "proceed", "redo", "repeat"}
    | {"rerun", "resume", "retry", "same", "sure", "thanks", "time", "try", "yeah", "yep"}
)
"""The words (besides stop words) a one-word follow-up is made of ("continue", "try again", "keep
going"): such a goal names no task, while a one-word task ("deploy") does."""
_UNSPACED: Final = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")
"""Han and kana: scripts written without spaces, where one term of :func:`goal_key` is a whole phrase."""


def _names_task(goal: str) -> bool:
    """Whether ``goal`` (a :func:`goal_key`) names a task, so that a newer fix for it supersedes the
    older ones: two content words, or one spaced word that is no follow-up. One word written without
    spaces ("继续", go on) is not told from a task without a word list per language: it needs two."""
    if _content_words(goal) >= _MIN_SUPERSEDING_GOAL_WORDS:
        return True
    return bool(goal) and goal not in _FOLLOW_UPS and not _UNSPACED.search(goal)


def _content_words(goal: str) -> int:
    """The content words of ``goal`` (a :func:`goal_key`): a term written without spaces counts one
    per two of its Han or kana characters (about a word each), so "构建acme仓库并运行测试" names a task
    and "继续" (go on) does not."""
    count = 0
    for term in goal.split():
        unspaced = len(_UNSPACED.findall(term))
        count += max(1, unspaced // 2 + (len(term) > unspaced))
    return count


def should_learn(last_activity: float | None, now: float, idle_minutes: float, run_active: bool) -> bool:
    """The common idle window: no run active and no event for ``idle_minutes`` (0 disables).

    An empty session (``last_activity`` None) is idle: episodes committed before a
    rotation are learned from even if the new session never starts.
    """
    if idle_minutes <= 0 or run_active:
        return False
    return last_activity is None or now - last_activity >= idle_minutes * 60.0


def _first_try_completion(episode: Episode, tried: list[Attempt]) -> tuple[Attempt, int] | None:
    """The attempt that completed the run's goal at the first try and the seq of the answer after it.

    Every attempt worked and all are one step, no user correction anywhere (it may have changed the
    task), the run answered after the step and the caller did not record a failure.
    """
    if not tried or any(not a.ok for a in tried) or len({a.step for a in tried}) != 1:
        return None
    if episode.outcome == "failure" or any(e.type == "user_correction" for e in episode.events):
        return None
    # With every attempt working and no correction, an answer after the last is assess()'s success.
    answer = answer_after(episode, tried[-1].result.seq)
    return None if answer is None else (tried[-1], answer)


def learn(episode: Episode, existing: Sequence[ExperienceRecord], *, ttl_s: float | None = None) -> Lessons:
    """The lessons of ``episode`` given the ``existing`` records of its environment (any status)."""
    when = episode.finished_at
    expires = None if ttl_s is None else when + ttl_s
    # A record stored before names were normalized ("acme  prod") hashed that spelling into its id:
    # the lessons of its environment keep its spelling, so learning one again updates that record.
    env = next(
        (r.environment for r in existing if same_environment(r.environment, episode.environment)),
        episode.environment,
    )
    episode = msgspec.structs.replace(episode, environment=env)
    goal = episode.goal_key or goal_key(episode.goal)  # "" in an older episode: the key of its start
    known = {r.id: r for r in existing}
    changed: dict[str, ExperienceRecord] = {}

    def current(rid: str) -> ExperienceRecord | None:
        return changed.get(rid, known.get(rid))

    def lesson(kind: RecordKind, step: str, title: str, body: str, seqs: tuple[int, ...]) -> ExperienceRecord:
        """A new active record of the episode's goal and environment about ``step``, citing ``seqs``."""
        title = f"{episode.goal[:120]}: {title}"
        return new_record(episode, kind, step, title, body, seqs, expires_at=expires, goal=goal)

    def put(record: ExperienceRecord) -> None:
        merged = merge(current(record.id), record)
        if merged != known.get(record.id):
            changed[record.id] = merged
        else:
            changed.pop(record.id, None)

    tried = attempts(episode)
    failed = {a.step for a in tried if not a.ok}
    worked = {a.step for a in tried if a.ok}
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
        if fix is not None and fix.step not in failed and not corrected_after(episode, fix, tried):
            fixes.append((fail, fix))
    new_procedures: set[str] = set()
    by_fix: dict[str, tuple[Attempt, list[Attempt]]] = {}
    for fail, fix in fixes:
        by_fix.setdefault(fix.step, (fix, []))[1].append(fail)
    # A fix that changed only numbers of every failed call it replaced is a calibration.
    kind_of: dict[str, RecordKind] = {
        step: "calibration"
        if all(numbers_changed(f.call.content, fix.call.content) for f in fails)
        else "procedure"
        for step, (fix, fails) in by_fix.items()
    }
    for fail, fix in fixes:
        cited = (*fail.seqs, *fix.seqs)
        put(
            lesson(
                "failure",
                fail.step,
                f"`{fail.step}` fails",
                f"For '{episode.goal}', `{fail.step}` failed with: {_quote(fail.result.content)}\n\n"
                f"What worked instead: `{fix.step}`.",
                cited,
            )
        )
        kind = kind_of[fix.step]
        tuned = ", ".join(f"`{name}`" for name in numbers_changed(fail.call.content, fix.call.content))
        working = lesson(
            kind,
            fix.step,
            f"`{fix.step}`",
            f"For '{episode.goal}', `{fix.step}` worked (output: {_quote(fix.result.content)}) "
            f"after `{fail.step}` failed{f' (only {tuned} changed)' if kind == 'calibration' else ''}. "
            "Verify against current observations before relying on it.",
            cited,
        )
        new_procedures.add(working.id)
        put(working)
    first_try = _first_try_completion(episode, tried)
    if first_try is not None and not any(
        r.kind in _WORKING and r.step == first_try[0].step and same_environment(r.environment, env)
        for r in known.values()
    ):
        # A step some procedure already names is confirmed below instead (one record per step).
        done, answer = first_try
        put(
            lesson(
                "procedure",
                done.step,
                f"`{done.step}`",
                f"For '{episode.goal}', `{done.step}` completed the task at the first try (output: "
                f"{_quote(done.result.content)}). Verify against current observations before relying on it.",
                (*done.seqs, answer),
            )
        )
    superseded: list[str] = []
    names_task = _names_task(goal)
    for record in list(known.values()):
        rec = current(record.id) or record
        if not same_environment(rec.environment, env) or rec.id in new_procedures:
            continue
        steps = [a for a in tried if a.step == rec.step]
        seqs = tuple(s for a in steps for s in a.seqs)
        if rec.kind in _WORKING and rec.status != "legacy" and rec.goal == goal and new_procedures and names_task:
            why = f"superseded by {sorted(new_procedures)[0]} (episode {episode.id})"
            changed[rec.id] = restatused(rec, "legacy", why, when)
            superseded.append(rec.step)
        elif rec.status == "active" and (
            (rec.kind in _WORKING and rec.step in failed and rec.step not in worked)
            or (rec.kind == "failure" and rec.step in worked and rec.step not in failed)
        ):
            verdict = "failed" if rec.kind in _WORKING else "succeeded"
            why = f"episode {episode.id} seqs {list(seqs)}: the step {verdict}"
            changed[rec.id] = restatused(rec, "disputed", why, when)
        elif (
            rec.kind in _WORKING and rec.status != "legacy" and rec.step in worked and rec.step not in failed
        ):
            # Confirmed (a disputed one is active again); a legacy procedure stays superseded.
            put(confirmed(rec, episode, seqs, expires_at=expires))
    # A failure whose "what worked instead" names a superseded procedure now names the new fix
    # (the failure itself still holds; only its advice went stale).
    for rid in known if superseded else ():
        stale = current(rid)
        if stale is None or stale.kind != "failure" or not same_environment(stale.environment, env) or stale.goal != goal:
            continue
        for old in superseded:
            tail = f"What worked instead: `{old}`."
            if stale.status == "active" and stale.body.endswith(tail):
                now = f"What works instead now: `{next(iter(by_fix))}` (episode {episode.id})."
                put(msgspec.structs.replace(stale, body=stale.body[: -len(tail)] + now))
                break
    # Facts and navigation records merge with their known versions themselves: keep what changed.
    for record in (
        *fact_records(episode, known, expires_at=expires),
        *navigation_records(episode, tried, known, expires_at=expires),
    ):
        if record != known.get(record.id):
            changed[record.id] = record
    observations = {
        e.key: e.content[:MAX_FACT_VALUE_CHARS] for e in episode.events if e.type == "observation" and e.key
    }
    profile = (
        EnvironmentProfile(environment=env, observations=observations, episode_id=episode.id, updated_at=when)
        if observations
        else None
    )
    ordered = tuple(changed[k] for k in sorted(changed))
    groups: list[LessonGroup] = []
    for fix, fails in by_fix.values():
        pid = record_id(kind_of[fix.step], env, goal, fix.step)
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


MAX_PLACES: Final = 8
"""Navigation records one episode may create (the places it used first)."""
SCAN_CHARS: Final = 8_000
"""Characters of a result (and of a call's arguments) scanned for locations."""
_MAX_LOCATION_CHARS: Final = 300

# A URL, a path with at least one "/", or a file name with an extension. A token starts only
# where no location character precedes it, so each token is tried once (no quadratic rescans).
_CHARS: Final = r"[\w.@%+~-]"
_TOKEN: Final = re.compile(
    rf"(?<![\w./~@%+:-])(?:[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"`<>()\[\]{{}},;|]+"
    rf"|(?:~|\.{{1,2}})?/?(?:{_CHARS}+/)+{_CHARS}*"
    rf"|[\w@%+~-]{_CHARS}*\.[A-Za-z][A-Za-z0-9]{{0,9}}(?!\w))"
)
_FILE: Final = re.compile(r"[^/]*[^/.]\.[A-Za-z][A-Za-z0-9]{0,9}")
_NOT_FOUND: Final = re.compile(
    r"no such (?:file|directory)|\bnot found\b|does(?: not|n't) exist|\benoent\b|filenotfounderror|\b404\b"
    r"|(?:cannot|can't|could not|couldn't|unable to) (?:find|access|open|stat|locate)",
    re.IGNORECASE,
)
_COMMAND_NOT_FOUND: Final = re.compile(r"command not found", re.IGNORECASE)


def locations(text: str) -> tuple[str, ...]:
    """The distinct locations ``text`` names, in order: URLs, paths with a ``/``, file names with an
    extension (``./`` and a trailing ``/`` dropped; a location needs a letter and 4-300 characters)."""
    out: dict[str, None] = {}
    for match in _TOKEN.finditer(text[:SCAN_CHARS]):
        token = re.sub(r"^(?:\./)+", "", match.group(0).rstrip(".,:;")).rstrip("/")
        if (
            4 <= len(token) <= _MAX_LOCATION_CHARS
            and any(c.isalpha() for c in token)
            and ("/" in token or _FILE.fullmatch(token) is not None)
        ):
            out.setdefault(token, None)
    return tuple(out)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _arguments(content: str) -> tuple[str, ...]:
    """The locations a call's arguments name: in its JSON string values, else in its text."""
    try:
        return locations("\n".join(_strings(json.loads(content))))
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read as JSON
        return locations(content)


def same_place(a: str, b: str) -> bool:
    """Two spellings of one place: equal, or one ends with the other after a ``/``."""
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def names_place(named: str, location: str) -> bool:
    """``named`` (in a goal, in a call's arguments) says where ``location`` is: the same place, and
    not a bare file name standing for a path (``find . -name redis.yaml`` names what is looked
    for, not where it is)."""
    return named == location or ("/" in named and same_place(location, named))


def place_name(location: str) -> str:
    """What is at ``location``: its last component (a file name, a directory, a URL's last part)."""
    return location.rsplit("/", 1)[-1]


def not_found(content: str, location: str) -> bool:
    """A failure saying ``location`` is not there: a not-found error that names the place (any 404
    for a URL), not a missing program (``command not found``)."""
    text = content[:SCAN_CHARS]
    if _NOT_FOUND.search(text) is None or _COMMAND_NOT_FOUND.search(text) is not None:
        return False
    return "://" in location or place_name(location).casefold() in text.casefold()


@dataclass(frozen=True, slots=True)
class Place:
    """A location an episode looked up and then used: the direct evidence of a navigation record."""

    location: str
    lookup: Attempt
    use: Attempt

    @property
    def name(self) -> str:
        """What is there (the location's last component)."""
        return place_name(self.location)

    @property
    def seqs(self) -> tuple[int, int, int, int]:
        """The lookup's call and result, the use's call and result."""
        return (*self.lookup.seqs, *self.use.seqs)


def found_places(episode: Episode, tried: Sequence[Attempt]) -> list[Place]:
    """The places ``episode`` looked up and then used, first used first (at most :data:`MAX_PLACES`)."""
    by_name: dict[str, list[tuple[Attempt, str]]] = {}
    for attempt in tried:
        for loc in _arguments(attempt.call.content):
            by_name.setdefault(place_name(loc), []).append((attempt, loc))
    goal = locations(episode.goal)
    shown: set[str] = set()
    found: dict[str, Place] = {}
    for lookup in tried:
        if not lookup.ok:
            continue
        for location in locations(lookup.result.content):
            if location in shown:
                continue
            shown.add(location)
            calls = [
                (a, loc) for a, loc in by_name.get(place_name(location), []) if names_place(loc, location)
            ]
            if any(names_place(g, location) for g in goal) or any(
                a.call.seq < lookup.result.seq for a, _ in calls
            ):
                continue  # named before the lookup answered: it revealed nothing
            use = next(
                (
                    (a, loc)
                    for a, loc in calls
                    if a.ok and a.call.seq > lookup.result.seq and not corrected_after(episode, a, tried)
                ),
                None,
            )
            if use is not None:
                found.setdefault(use[1], Place(use[1], lookup, use[0]))
    places = sorted(found.values(), key=lambda p: (p.use.call.seq, p.location))
    deepest = [p for p in places if not any(q.location.startswith(p.location + "/") for q in places)]
    return deepest[:MAX_PLACES]


def navigation_records(
    episode: Episode,
    tried: Sequence[Attempt],
    known: Mapping[str, ExperienceRecord],
    *,
    expires_at: float | None,
) -> list[ExperienceRecord]:
    """The navigation records ``episode`` creates, confirms, disputes or supersedes, given the
    ``known`` records of its environment (by id). A record equal to its known version may be
    returned; the caller keeps only what changed."""
    env = episode.environment
    when = episode.finished_at
    places = found_places(episode, tried)
    out: dict[str, ExperienceRecord] = {}
    for place in places:
        if place.location == place.name:
            continue  # a bare name ("setup.py is at setup.py", seen in a listing of the root) says nothing
        fresh = new_record(
            episode,
            "navigation",
            place.location,
            f"{place.name} is at {place.location}",
            # Worded like a procedure's body: the environment and the episode are in their own fields.
            f"`{place.name}` is at `{place.location}`: `{place.lookup.step}` showed it and "
            f"`{place.use.step}` used it, for '{episode.goal[:200]}'. Verify against current "
            "observations before relying on it.",
            place.seqs,
            expires_at=expires_at,
        )
        out.setdefault(fresh.id, merge(known.get(fresh.id), fresh))
    named = [(a, _arguments(a.call.content)) for a in tried]
    for rec in known.values():
        if rec.kind != "navigation" or not same_environment(rec.environment, env) or rec.id in out or rec.status == "legacy":
            continue
        naming = [a for a, locs in named if any(names_place(loc, rec.step) for loc in locs)]
        worked = [a for a in naming if a.ok and not corrected_after(episode, a, tried)]
        gone = [a for a in naming if not a.ok and not_found(a.result.content, rec.step)]
        moved = next((p for p in places if p.name == place_name(rec.step)), None)
        if worked:
            out[rec.id] = confirmed(rec, episode, worked[0].seqs, expires_at=expires_at)
        elif moved is not None and (gone or rec.status == "disputed"):
            where = f"`{moved.location}` found and used in episode {episode.id} seqs {list(moved.seqs)}"
            out[rec.id] = restatused(rec, "legacy", f"moved: {where}", when)
        elif gone and rec.status == "active":
            seqs = [s for a in gone for s in a.seqs]
            why = f"episode {episode.id} seqs {seqs}: `{rec.step}` was not found"
            out[rec.id] = restatused(rec, "disputed", why, when)
    return list(out.values())
