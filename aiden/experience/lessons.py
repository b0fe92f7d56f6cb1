"""What one episode teaches, as the experience policy hands it on (:mod:`aiden.experience.learner`).

:class:`Lessons` carries the records to create or replace; its
:class:`LessonGroup` s are what an LLM learner may *phrase* (never decide):
:func:`rephrased` puts a model's wording in the records' bodies and keeps the
exact steps beside it, so ids, statuses and evidence stay the embedded
learner's. :func:`merge` is how a lesson learned again joins the record kept
under its id, :func:`confirmed` how a later episode confirms one. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgspec

from aiden.experience.episodes import Episode
from aiden.experience.records import MAX_EVIDENCE, MAX_TASKS, EnvironmentProfile, Evidence, ExperienceRecord
from aiden.lifecycle import Outcome

__all__ = ["LessonGroup", "Lessons", "confirmed", "merge", "rephrased"]


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


def merge(old: ExperienceRecord | None, new: ExperienceRecord) -> ExperienceRecord:
    """``new`` (a lesson learned again, or confirmed) joined with ``old``, the record kept under its id:
    the old creation time, the evidence of both (each episode once; the first and the newest kept,
    at most :data:`MAX_EVIDENCE`), the task statements of both (newest last, at most
    :data:`MAX_TASKS`), the later update and expiry. Everything else is ``new``'s."""
    if old is None:
        return new
    cited = {e.episode_id for e in old.evidence}
    evidence = old.evidence + tuple(e for e in new.evidence if e.episode_id not in cited)
    if len(evidence) > MAX_EVIDENCE:
        evidence = evidence[:1] + evidence[-(MAX_EVIDENCE - 1) :]
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


def confirmed(
    record: ExperienceRecord, episode: Episode, seqs: tuple[int, ...], *, expires_at: float | None
) -> ExperienceRecord:
    """``record`` confirmed by ``episode`` (what it names worked again, at ``seqs``): active (a
    disputed one active again, its reason dropped), the episode and its task added (:func:`merge`)."""
    return merge(
        record,
        msgspec.structs.replace(
            record,
            status="active",
            status_reason="" if record.status == "disputed" else record.status_reason,
            evidence=(Evidence(episode_id=episode.id, seqs=seqs),),
            updated_at=episode.finished_at,
            expires_at=expires_at,
            tasks=(episode.goal,),
        ),
    )
