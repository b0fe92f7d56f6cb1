"""What one episode teaches, as the experience policy hands it on (:mod:`aiden.policy.experience`).

:class:`Lessons` carries the records to create or replace; its
:class:`LessonGroup` s are what an LLM learner may *phrase* (never decide):
:func:`rephrased` puts a model's wording in the records' bodies and keeps the
exact steps beside it, so ids, statuses and evidence stay the embedded
learner's. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgspec

from aiden.experience.episodes import Outcome
from aiden.experience.records import EnvironmentProfile, ExperienceRecord

__all__ = ["LessonGroup", "Lessons", "rephrased"]


@dataclass(frozen=True, slots=True)
class LessonGroup:
    """One working step and the failed steps it replaced, as an LLM learner may phrase them.

    ``failed`` holds ``(step, quoted error)`` pairs; the record ids are the
    learned records this group's phrasing goes into.
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
    """What one episode teaches: records to create or replace, the environment profile, the assessment.

    ``groups`` are the newly learned (procedure, failures) groups whose records
    are among ``records``: what an LLM learner phrases, one call per group.
    """

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
