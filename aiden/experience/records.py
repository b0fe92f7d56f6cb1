"""Experience records and environment profiles: formats, pure.

A record is one Markdown file (a JSON header comment, the title, the body) and one row of
``index.yaml`` carrying everything recall filters and ranks by, so an expired, disputed or legacy
record is rejected without opening its file. Statuses: ``active`` (recall returns it),
``disputed`` (later evidence contradicts it), ``legacy`` (superseded). A record learned again keeps
its id (:func:`record_id`); :func:`merge` is how the new lesson joins it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal, TypeVar, get_args

import msgspec
import yaml

from aiden.errors import CorruptionError, InvalidIdError
from aiden.events import Seq, validate_id
from aiden.experience.episodes import MAX_TERMS, Episode, goal_key, terms_of

__all__ = [
    "INDEX_VERSION",
    "MAX_EVIDENCE",
    "MAX_TASKS",
    "RECORD_KINDS",
    "EnvironmentProfile",
    "Evidence",
    "ExperienceRecord",
    "RecordIndex",
    "RecordKind",
    "RecordRow",
    "RecordStatus",
    "confirmed",
    "goal_key",
    "merge",
    "new_record",
    "parse_index_yaml",
    "parse_record_md",
    "parse_yaml_index",
    "record_id",
    "render_record_md",
    "restatused",
    "render_yaml_index",
    "terms_of",
]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_BYTES: Final = 16 * 1024 * 1024

T = TypeVar("T")


def parse_yaml_index(
    data: bytes, kind: type[T], *, name: str, version: int, ids: Callable[[T], Iterable[str]], what: str
) -> T:
    """``data`` as a ``kind`` (empty: ``kind()``); :class:`CorruptionError` naming the file for anything
    else (the store then rebuilds the index from its files).

    Safe loader, bounded size, ``version`` checked; the ids ``ids(index)`` lists are validated (as
    ``what``) and must be distinct.
    """
    if len(data) > _MAX_BYTES:
        raise CorruptionError(f"{name} larger than {_MAX_BYTES} bytes")
    try:
        raw = yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise CorruptionError(f"{name} is not valid safe YAML: {exc}") from exc
    if raw is None:
        return kind()
    if not isinstance(raw, dict) or raw.get("version") != version:
        raise CorruptionError(f"{name} is not a version {version} mapping")
    try:
        index = msgspec.convert(raw, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise CorruptionError(f"{name} invalid: {exc}") from exc
    seen: set[str] = set()
    for item in ids(index):
        try:
            validate_id(item, what=what)
        except InvalidIdError as exc:
            raise CorruptionError(f"{name}: {exc}") from exc
        if item in seen:
            raise CorruptionError(f"{name}: duplicate {what} {item!r}")
        seen.add(item)
    return index


def render_yaml_index(index: object) -> bytes:
    """The YAML text of ``index`` (``yaml.safe_dump``: plain data, no tags, field order kept)."""
    text = yaml.safe_dump(msgspec.to_builtins(index), sort_keys=False, allow_unicode=True, width=4096)
    return text.encode("utf-8")


RecordKind = Literal["procedure", "navigation", "calibration", "failure", "fact"]
RECORD_KINDS: Final[tuple[str, ...]] = get_args(RecordKind)
RecordStatus = Literal["active", "disputed", "legacy"]
INDEX_VERSION: Final = 1


MAX_TASKS: Final = 8
"""Task statements kept per record (the oldest drop out)."""
MAX_EVIDENCE: Final = 16
"""Evidence entries kept per record (the first and the newest): a step confirmed by every run must
not outgrow the record file's read limit."""


def record_id(kind: str, environment: str, goal: str, step: str) -> str:
    """The deterministic id of the record ``(kind, environment, goal, step)``: a lesson learned twice
    (a retried worker, a second episode) updates its record instead of duplicating it."""
    digest = hashlib.sha256("\x1f".join((kind, environment, goal, step)).encode("utf-8")).hexdigest()
    return f"{kind[:4]}-{digest[:20]}"


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """Where a record's proof is: one episode and the seqs of its events."""

    episode_id: str
    seqs: tuple[Seq, ...]


class ExperienceRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One lesson. ``environment`` "" applies everywhere; ``step`` is the tool-call signature it is about."""

    id: str
    kind: RecordKind
    status: RecordStatus
    title: str
    body: str
    environment: str = ""
    goal: str = ""
    step: str = ""
    evidence: tuple[Evidence, ...] = ()
    created_at: float
    updated_at: float
    expires_at: float | None = None
    status_reason: str = ""
    source: Literal["embedded", "llm"] = "embedded"
    tasks: tuple[str, ...] = ()
    """The task statements (episode goals) the lesson was learned or confirmed under, newest last,
    at most :data:`MAX_TASKS`: an agent words one task many ways, and recall matches them all."""

    def expired(self, now: float) -> bool:
        """True once ``now`` reached ``expires_at``."""
        return self.expires_at is not None and now >= self.expires_at

    def row(self) -> RecordRow:
        """The record's index row."""
        return RecordRow(
            id=self.id,
            kind=self.kind,
            status=self.status,
            title=self.title,
            environment=self.environment,
            goal=self.goal,
            step=self.step,
            terms=terms_of(
                f"{self.title} {self.goal} {self.step} {' '.join(self.tasks)} {self.body}", 2 * MAX_TERMS
            ),
            task_terms=terms_of(f"{self.goal} {' '.join(self.tasks)}"),
            created_at=self.created_at,
            updated_at=self.updated_at,
            expires_at=self.expires_at,
        )


class RecordRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A record's line in ``index.yaml``: enough to filter and rank without opening the file."""

    id: str
    kind: RecordKind
    status: RecordStatus
    title: str
    environment: str = ""
    goal: str = ""
    step: str = ""
    terms: tuple[str, ...] = ()
    task_terms: tuple[str, ...] = ()
    """The terms of the task statements the record serves (goal and tasks), also in ``terms``:
    recall weighs them double, since a query says what the agent is trying to do."""
    created_at: float
    updated_at: float
    expires_at: float | None = None

    def expired(self, now: float) -> bool:
        """True once ``now`` reached ``expires_at``."""
        return self.expires_at is not None and now >= self.expires_at


class RecordIndex(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``experience/index.yaml``: every record's row, oldest first."""

    version: int = INDEX_VERSION
    records: tuple[RecordRow, ...] = ()


class EnvironmentProfile(msgspec.Struct, frozen=True, kw_only=True):
    """Deterministic observations of one environment (versions, paths, sizes): facts seen, not lessons."""

    environment: str
    observations: dict[str, str]
    episode_id: str
    updated_at: float


_META_LINE: Final = re.compile(r"^<!-- aiden-experience (\{.*\}) -->$")
_encoder: Final = msgspec.json.Encoder()
_header_decoder: Final = msgspec.json.Decoder(dict[str, Any])


def render_record_md(record: ExperienceRecord) -> str:
    """The Markdown file of ``record`` (the title on one line; ``-->`` cannot end the header early)."""
    fields = msgspec.to_builtins(record)
    msgspec.convert(fields, type(record))  # a value outside its type is refused here, not at the next read
    meta = {k: v for k, v in fields.items() if k not in ("title", "body")}
    head = _encoder.encode(meta).decode().replace("-->", "--\\u003e")
    title = " ".join(record.title.split())
    return f"<!-- aiden-experience {head} -->\n# {title}\n\n{record.body.strip()}\n"


def parse_record_md(text: str) -> ExperienceRecord:
    """Parse a record file; :class:`CorruptionError` if it is not one."""
    lines = text.split("\n")
    match = _META_LINE.match(lines[0]) if lines else None
    if match is None or len(lines) < 2 or not lines[1].startswith("# "):
        raise CorruptionError("not an aiden experience record (missing header)")
    try:
        meta = _header_decoder.decode(match.group(1))
        meta.update(title=lines[1][2:].strip(), body="\n".join(lines[2:]).strip())
        record = msgspec.convert(meta, ExperienceRecord)
        validate_id(record.id, what="record id")
    except (msgspec.DecodeError, msgspec.ValidationError, InvalidIdError) as exc:
        raise CorruptionError(f"experience record header invalid: {exc}") from exc
    return record


def parse_index_yaml(data: bytes) -> RecordIndex:
    """Parse ``index.yaml`` safely; :class:`CorruptionError` for anything but a valid index."""
    return parse_yaml_index(
        data,
        RecordIndex,
        name="experience index.yaml",
        version=INDEX_VERSION,
        ids=lambda index: [row.id for row in index.records],
        what="record id",
    )


def merge(old: ExperienceRecord | None, new: ExperienceRecord) -> ExperienceRecord:
    """``new`` (a lesson learned again, or confirmed) joined with ``old``, the record kept under its id:
    the old creation time, the evidence and tasks of both (bounded), the later update and expiry;
    everything else is ``new``'s."""
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


def new_record(
    episode: Episode,
    kind: RecordKind,
    step: str,
    title: str,
    body: str,
    seqs: tuple[int, ...],
    *,
    expires_at: float | None,
    goal: str = "",
) -> ExperienceRecord:
    """A new active record of ``episode``'s environment (and ``goal``) about ``step``, citing ``seqs``."""
    return ExperienceRecord(
        id=record_id(kind, episode.environment, goal, step),
        kind=kind,
        status="active",
        title=title,
        body=body,
        environment=episode.environment,
        goal=goal,
        step=step,
        evidence=(Evidence(episode_id=episode.id, seqs=seqs),),
        created_at=episode.finished_at,
        updated_at=episode.finished_at,
        expires_at=expires_at,
        # A fact is an observation of the environment, not learned under a task.
        tasks=() if kind == "fact" else (episode.goal,),
    )


def restatused(record: ExperienceRecord, status: RecordStatus, reason: str, when: float) -> ExperienceRecord:
    """``record`` given ``status`` for ``reason`` by an episode that ended at ``when`` (its update time
    never goes back)."""
    return msgspec.structs.replace(
        record, status=status, status_reason=reason, updated_at=max(record.updated_at, when)
    )


def confirmed(
    record: ExperienceRecord, episode: Episode, seqs: tuple[int, ...], *, expires_at: float | None
) -> ExperienceRecord:
    """``record`` confirmed by ``episode`` at ``seqs``: active (a disputed one's reason dropped), the
    episode and its task added."""
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
