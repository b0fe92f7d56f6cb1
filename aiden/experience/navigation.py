"""Navigation records: where things are in an environment, from a lookup and a use (pure).

A *lookup* is a call that worked and whose result names a location ``L`` nothing earlier in the run
named (not the goal, no earlier call's arguments; a bare file name there says what is looked for,
not where); a *use* is a later working call naming ``L``, with no user correction after it.
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
from dataclasses import dataclass
from typing import Final

from aiden.experience.episodes import Attempt, Episode, corrected_after, same_environment
from aiden.experience.records import ExperienceRecord, confirmed, merge, new_record, restatused

__all__ = [
    "MAX_PLACES",
    "SCAN_CHARS",
    "Place",
    "found_places",
    "locations",
    "names_place",
    "navigation_records",
    "not_found",
    "place_name",
    "same_place",
]

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


def _normal(token: str) -> str:
    token = token.rstrip(".,:;")
    while token.startswith("./"):
        token = token[2:]
    return token.rstrip("/")


def locations(text: str) -> tuple[str, ...]:
    """The distinct locations ``text`` names, in order: URLs, paths with a ``/``, file names with an
    extension (``./`` and a trailing ``/`` dropped; a location needs a letter and 4-300 characters)."""
    out: dict[str, None] = {}
    for match in _TOKEN.finditer(text[:SCAN_CHARS]):
        token = _normal(match.group(0))
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


def _fresh(episode: Episode, place: Place, expires_at: float | None) -> ExperienceRecord:
    return new_record(
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
        fresh = _fresh(episode, place, expires_at)
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
