"""Long-term memory entries (``memories/<id>.md``) and ``index.yaml`` version 2: formats, pure.

The index holds every entry's metadata, so expired entries are rejected without opening their
files. It is parsed with a safe loader and converted strictly: anything else is
:class:`~aiden.errors.CorruptionError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final, Literal, get_args

import msgspec
import yaml

from aiden.errors import CorruptionError, InvalidIdError, MemoryEntryError
from aiden.events import validate_id
from aiden.summarizers.mustkeep.text import content_words

__all__ = [
    "INDEX_VERSION",
    "MAX_CONTENT_CHARS",
    "MAX_TITLE_CHARS",
    "MEMORY_TYPES",
    "IndexEntry",
    "LongTermIndex",
    "MemoryEntry",
    "MemoryType",
    "make_entry",
    "parse_entry_md",
    "parse_index_yaml",
    "rank_entries",
    "render_entry_md",
    "render_index_yaml",
]

MemoryType = Literal["preference", "rule", "fact", "procedure", "manual"]
MEMORY_TYPES: Final[tuple[str, ...]] = get_args(MemoryType)
INDEX_VERSION: Final = 2
MAX_TITLE_CHARS: Final = 200
MAX_CONTENT_CHARS: Final = 8000
_MAX_INDEX_BYTES: Final = 8 * 1024 * 1024

# The C loader when libyaml is present; both are safe loaders (no object construction).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class MemoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One saved memory. ``expires_at`` (Unix seconds) ``None`` means it never expires."""

    id: str
    type: MemoryType
    title: str
    content: str
    created_at: float
    expires_at: float | None = None

    def expired(self, now: float) -> bool:
        """True once ``now`` reached ``expires_at``."""
        return self.expires_at is not None and now >= self.expires_at


class IndexEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An entry's line in ``index.yaml``: enough to filter without reading the file."""

    id: str
    type: MemoryType
    title: str
    created_at: float
    expires_at: float | None = None

    def expired(self, now: float) -> bool:
        """True once ``now`` reached ``expires_at``."""
        return self.expires_at is not None and now >= self.expires_at


class LongTermIndex(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``index.yaml``: version 2 and the entries, oldest first."""

    version: int = INDEX_VERSION
    entries: tuple[IndexEntry, ...] = ()


def make_entry(
    *,
    memory_id: str,
    type: str,
    title: str,
    content: str,
    created_at: float,
    expires_at: float | None = None,
) -> MemoryEntry:
    """Validate and build an entry; :class:`MemoryEntryError` (or ``InvalidIdError``) on bad input."""
    validate_id(memory_id, what="memory id")
    if type not in MEMORY_TYPES:
        raise MemoryEntryError(f"invalid memory type {type!r}: expected one of {list(MEMORY_TYPES)}")
    flat_title = " ".join(title.split())
    if not flat_title:
        raise MemoryEntryError("title must not be empty")
    if len(flat_title) > MAX_TITLE_CHARS:
        raise MemoryEntryError(f"title longer than {MAX_TITLE_CHARS} characters")
    body = content.strip()
    if not body:
        raise MemoryEntryError("content must not be empty")
    if len(body) > MAX_CONTENT_CHARS:
        raise MemoryEntryError(f"content longer than {MAX_CONTENT_CHARS} characters")
    if "\x00" in body or "\x00" in flat_title:
        raise MemoryEntryError("text must not contain NUL characters")
    if expires_at is not None and expires_at <= created_at:
        raise MemoryEntryError("expires_at must be later than now")
    return MemoryEntry(
        id=memory_id,
        type=type,  # type: ignore[arg-type]  # checked against MEMORY_TYPES above
        title=flat_title,
        content=body,
        created_at=created_at,
        expires_at=expires_at,
    )


class _Meta(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    type: MemoryType
    created_at: float
    expires_at: float | None = None


_META_LINE: Final = re.compile(r"^<!-- aiden-memory (\{.*\}) -->$")
_meta_encoder: Final = msgspec.json.Encoder()
_meta_decoder: Final = msgspec.json.Decoder(_Meta)


def render_entry_md(entry: MemoryEntry) -> str:
    """The Markdown file of ``entry``."""
    meta = _Meta(id=entry.id, type=entry.type, created_at=entry.created_at, expires_at=entry.expires_at)
    head = _meta_encoder.encode(meta).decode()
    return f"<!-- aiden-memory {head} -->\n# {entry.title}\n\n{entry.content}\n"


def parse_entry_md(text: str) -> MemoryEntry:
    """Parse an entry file; :class:`CorruptionError` if it is not one."""
    lines = text.split("\n")
    match = _META_LINE.match(lines[0])  # split always returns at least one line
    if match is None or len(lines) < 2 or not lines[1].startswith("# "):
        raise CorruptionError("not an aiden memory file (missing header)")
    try:
        meta = _meta_decoder.decode(match.group(1))
        validate_id(meta.id, what="memory id")
    except (msgspec.DecodeError, msgspec.ValidationError, InvalidIdError) as exc:
        raise CorruptionError(f"memory file header invalid: {exc}") from exc
    return MemoryEntry(
        id=meta.id,
        type=meta.type,
        title=lines[1][2:].strip(),
        content="\n".join(lines[2:]).strip(),
        created_at=meta.created_at,
        expires_at=meta.expires_at,
    )


def render_index_yaml(index: LongTermIndex) -> str:
    """``index.yaml`` text (``yaml.safe_dump``: plain data, no tags)."""
    return yaml.safe_dump(msgspec.to_builtins(index), sort_keys=False, allow_unicode=True, width=4096)


def parse_index_yaml(data: bytes) -> LongTermIndex:
    """Parse ``index.yaml`` with the safe loader, size bounded; :class:`CorruptionError` for anything but a valid version-2 index."""
    if len(data) > _MAX_INDEX_BYTES:
        raise CorruptionError(f"index.yaml larger than {_MAX_INDEX_BYTES} bytes")
    try:
        raw = yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise CorruptionError(f"index.yaml is not valid safe YAML: {exc}") from exc
    if raw is None:
        return LongTermIndex()
    if not isinstance(raw, dict):
        raise CorruptionError("index.yaml must be a mapping")
    if raw.get("version") != INDEX_VERSION:
        raise CorruptionError(f"index.yaml version {raw.get('version')!r} is not {INDEX_VERSION}")
    try:
        index = msgspec.convert(raw, LongTermIndex, strict=True)
    except msgspec.ValidationError as exc:
        raise CorruptionError(f"index.yaml invalid: {exc}") from exc
    seen: set[str] = set()
    for entry in index.entries:
        try:
            validate_id(entry.id, what="memory id")
        except InvalidIdError as exc:
            raise CorruptionError(f"index.yaml: {exc}") from exc
        if entry.id in seen:
            raise CorruptionError(f"index.yaml: duplicate id {entry.id!r}")
        seen.add(entry.id)
    return index


def _terms(text: str) -> set[str]:
    return {w.casefold() for w in content_words(text)}


def rank_entries(entries: Iterable[MemoryEntry], query: str, *, k: int) -> list[MemoryEntry]:
    """The ``k`` best of ``entries`` for ``query``, the same on every backend: most matching words first (a
    title word counts twice), then newest; non-matching entries are left out, and a query without content
    words returns the newest ``k``.
    """
    terms = _terms(query)
    if not terms:
        return sorted(entries, key=lambda e: -e.created_at)[:k]
    scored: list[tuple[int, float, MemoryEntry]] = []
    for entry in entries:
        title, body = _terms(entry.title), _terms(entry.content)
        score = 2 * len(terms & title) + len(terms & body)
        if score:
            scored.append((score, entry.created_at, entry))
    scored.sort(key=lambda t: (-t[0], -t[1]))
    return [e for _, _, e in scored[:k]]
