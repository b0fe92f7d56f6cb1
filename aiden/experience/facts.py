"""Fact records from an episode's observations (issue #21): what the environment was seen to be (pure).

``memory.observe(key, value)`` records a deterministic observation (a
version, a path, a size) on the episode. Beside the environment profile (the
latest values, kept apart from the lessons), each observed key becomes one
``fact`` record of its environment that ``recall_experience`` can find. Its
evidence is the observation event itself (episode id and seq): nothing is
inferred. One record per (environment, key): the same value observed again
adds the episode as evidence; a new value replaces the old one in place, the
status reason saying what it was, so a key that changes every run (a size)
does not pile up records. No model words a fact: the value is the fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from aiden.experience.episodes import Episode
from aiden.experience.lessons import merge
from aiden.experience.records import Evidence, ExperienceRecord, record_id

__all__ = ["MAX_FACT_VALUE_CHARS", "fact_records"]

MAX_FACT_VALUE_CHARS: Final = 500
"""An observed value is kept up to this length (the profile keeps the same)."""
_MAX_REASON_VALUE_CHARS: Final = 120


def _flat(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + " ..."


def fact_records(
    episode: Episode, known: Mapping[str, ExperienceRecord], *, expires_at: float | None
) -> list[ExperienceRecord]:
    """The fact records ``episode``'s observations give, merged with the ``known`` ones (by id).

    The last observation of a key in the episode wins. A record equal to its
    known version is still returned; the caller keeps only what changed.
    """
    latest: dict[str, tuple[str, int]] = {}
    for event in episode.events:
        key = " ".join((event.key or "").split())
        if event.type == "observation" and key:
            # Flat, as the record's title line is stored: a value compares equal to what was read back.
            latest[key] = (_flat(event.content, MAX_FACT_VALUE_CHARS), event.seq)
    when = episode.finished_at
    out: list[ExperienceRecord] = []
    for key, (value, seq) in latest.items():
        rid = record_id("fact", episode.environment, "", key)
        cite = Evidence(episode_id=episode.id, seqs=(seq,))
        fresh = ExperienceRecord(
            id=rid,
            kind="fact",
            status="active",
            title=" ".join(f"{key}: {value}".split()),
            body=(
                f"`{key}` was observed as `{value}` (episode {episode.id}). An observation of the "
                "environment at that time: verify it against current observations before relying on it."
            ),
            environment=episode.environment,
            step=key,
            evidence=(cite,),
            created_at=when,
            updated_at=when,
            expires_at=expires_at,
        )
        old = known.get(rid)
        if old is None:
            out.append(fresh)
        elif old.title == fresh.title:
            # The same value again: the episode joins the evidence; body and reason stay the first's.
            seen = msgspec.structs.replace(
                old, status="active", evidence=(cite,), updated_at=when, expires_at=expires_at
            )
            out.append(merge(old, seen))
        elif when >= old.updated_at:
            # A newer value: the old one's evidence is about the old value, so it goes with it.
            was = _flat(old.title.split(": ", 1)[-1], _MAX_REASON_VALUE_CHARS)
            out.append(
                msgspec.structs.replace(
                    fresh, created_at=old.created_at, status_reason=f"was `{was}` until episode {episode.id}"
                )
            )
    return out
