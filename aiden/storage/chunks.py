"""Chunk files and the chunk index: how compaction advances it, and summary.md rendered from it.

``chunks/<chunk_id>.jsonl``: a header line, then the compacted events verbatim::

    {"aiden_chunk":1,"chunk_id":"...","first_seq":11,"last_seq":40,"count":29,"sha256":"..."}
    {"type":"user_input",...}

``chunks/index.yaml`` is the commit point of a compaction: the rolling
summary, the newest chunk entries, and checksummed references to sealed
*segments* (immutable files of older entries), so a compaction costs
O(hot window), not O(history).

Summaries carry a CRC-32 on disk only (the sha256 covers a chunk's events,
and a flipped letter in a summary is still valid YAML or JSON): verified and
dropped on read, so entries in memory compare equal across backends. A damaged
summary makes index.yaml corrupt (recovery rebuilds it from chunk headers); one
in a chunk header is never served: the chunk reads as degraded.

summary.md and summary_archive.md are derived from the index, so recovery can
always re-derive them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from aiden.errors import CorruptionError, InvalidIdError
from aiden.events import SessionEvent, encode_event, validate_id
from aiden.policy import summary_md
from aiden.storage.fs import Storage
from aiden.storage.jsonl import scan
from aiden.storage.layout import Layout

__all__ = [
    "ARCHIVE_HEADER",
    "TRUNCATION_MARKER",
    "ChunkEntry",
    "ChunkFile",
    "ChunkIndex",
    "RollingFold",
    "SegmentRef",
    "advance_index",
    "append_lines",
    "cap_lines",
    "chunk_id_for",
    "covered",
    "encode_chunk",
    "fold_into_rolling",
    "load_all_entries",
    "load_index",
    "raw_breadcrumb",
    "read_chunk",
    "render_archive_entries",
    "render_summary_md",
    "restore_header",
    "save_index",
    "seal_segments",
    "sealed_index",
    "write_chunk",
]

INDEX_VERSION = 1
SEGMENT_SIZE = 32

log = logging.getLogger("aiden.storage")


class ChunkEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One committed chunk as recorded in the index."""

    chunk_id: str
    first_seq: int
    last_seq: int
    count: int
    sha256: str
    summary: str
    created_at: float = 0.0
    kept_seqs: list[int] = msgspec.field(default_factory=list)
    degraded: bool = False
    split_turn_context: str = ""
    cut_meta: dict[str, Any] | None = None
    summary_crc: int | None = None
    """CRC-32 of ``summary`` (UTF-8) in a file; None in memory (dropped once verified), older files, PostgreSQL."""

    def covers(self, seq: int) -> bool:
        """True if ``seq`` is in ``[first_seq, last_seq]`` and not one of ``kept_seqs`` (pinned, kept hot)."""
        return self.first_seq <= seq <= self.last_seq and seq not in self.kept_seqs




class SegmentRef(msgspec.Struct, frozen=True, kw_only=True):
    """A sealed, immutable file of older chunk entries."""

    file: str
    chunks: int
    first_seq: int
    last_seq: int
    sha256: str


class ChunkIndex(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The content of ``chunks/index.yaml``."""

    version: int = INDEX_VERSION
    rolling_summary: str = ""
    rolled_count: int = 0
    """How many of the oldest chunks have been folded into the rolling summary."""
    total_chunks: int = 0
    segments: list[SegmentRef] = msgspec.field(default_factory=list)
    chunks: list[ChunkEntry] = msgspec.field(default_factory=list)
    rolling_summary_crc: int | None = None
    """CRC-32 of ``rolling_summary`` (UTF-8) in index.yaml; None in memory and in older files."""

    @property
    def last_seq(self) -> int:
        """The highest seq any committed chunk covers (0 when none)."""
        if self.chunks:
            return self.chunks[-1].last_seq
        if self.segments:
            return self.segments[-1].last_seq
        return 0


class ChunkFile(msgspec.Struct, frozen=True):
    """A chunk file read back and verified."""

    entry: ChunkEntry
    events: list[SessionEvent]
    summary_damaged: bool = False
    """The header's summary failed its checksum: ``entry`` carries a degraded placeholder instead."""

    @property
    def chunk_id(self) -> str:
        """The chunk's id."""
        return self.entry.chunk_id

    @property
    def last_seq(self) -> int:
        """The last seq the chunk covers."""
        return self.entry.last_seq


class _Header(msgspec.Struct, frozen=True):
    # The header repeats the whole index entry (summary included), so a lost
    # or corrupt index.yaml can be rebuilt from chunk files alone.
    aiden_chunk: int
    entry: ChunkEntry


_header_dec = msgspec.json.Decoder(_Header)
_json = msgspec.json.Encoder()
_entry_dec = msgspec.json.Decoder(ChunkEntry)


def _header_line(entry: ChunkEntry) -> bytes:
    return _json.encode(_Header(1, _stamped(entry))) + b"\n"


def chunk_id_for(first_seq: int, last_seq: int) -> str:
    """The id of a chunk covering ``[first_seq, last_seq]``; ids are opaque to every reader."""
    return f"chunk_{first_seq:010d}_{last_seq:010d}"


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def _stamped(entry: ChunkEntry) -> ChunkEntry:
    return msgspec.structs.replace(entry, summary_crc=_crc(entry.summary))


def _verified(entry: ChunkEntry) -> ChunkEntry | None:
    """``entry`` read from a file without its checksum; None when its summary does not match it."""
    if entry.summary_crc is None:
        return entry  # written by an older version
    if entry.summary_crc != _crc(entry.summary):
        return None
    return msgspec.structs.replace(entry, summary_crc=None)


def covered(entries: Iterable[ChunkEntry], seq: int) -> bool:
    """True if any of ``entries`` covers ``seq``."""
    return any(e.covers(seq) for e in entries)


def encode_chunk(entry: ChunkEntry, events: Sequence[SessionEvent]) -> tuple[bytes, ChunkEntry]:
    """Return (file bytes, ``entry`` completed with the events' sha256 and count)."""
    validate_id(entry.chunk_id, what="chunk id")
    body = b"".join(encode_event(e) for e in events)
    digest = hashlib.sha256(body).hexdigest()
    full = msgspec.structs.replace(entry, sha256=digest, count=len(events))
    return _header_line(full) + body, full


def write_chunk(
    storage: Storage, layout: Layout, entry: ChunkEntry, events: Sequence[SessionEvent]
) -> ChunkEntry:
    """Durably write a chunk file (temp + fsync + rename + fsync chunks/); returns the completed entry."""
    data, full = encode_chunk(entry, events)
    storage.mkdir(layout.chunks)
    storage.write_atomic(layout.chunk_file(entry.chunk_id), data, crash_prefix="chunk")
    return full


def read_chunk(layout: Layout, chunk_id: str, *, expect_sha256: str | None = None) -> ChunkFile:
    """Read and verify a chunk file; raises :class:`CorruptionError` on any mismatch."""
    path = layout.chunk_file(chunk_id)
    if not layout.contains(path):
        raise InvalidIdError(f"chunk id {chunk_id!r} resolves outside the memory root")
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise CorruptionError(f"chunk file {path.name} is missing") from exc
    except OSError as exc:
        raise CorruptionError(f"chunk file {path.name} unreadable: {exc.strerror}") from exc
    nl = raw.find(b"\n")
    try:
        header = _header_dec.decode(raw[:nl] if nl >= 0 else raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"chunk file {path.name}: bad header: {exc}") from exc
    body = raw[nl + 1 :]
    entry = header.entry
    digest = hashlib.sha256(body).hexdigest()
    if digest != entry.sha256 or (expect_sha256 is not None and digest != expect_sha256):
        raise CorruptionError(f"chunk file {path.name}: checksum mismatch")
    result = scan(body)
    if result.bad_lines or result.torn_tail or len(result.events) != entry.count:
        raise CorruptionError(f"chunk file {path.name}: malformed events")
    if entry.chunk_id != chunk_id:
        raise CorruptionError(f"chunk file {path.name}: header names {entry.chunk_id!r}")
    intact = _verified(entry)
    if intact is None:
        # The events are intact (sha256 above): only the summary is lost, never served as it reads.
        # Degraded, so the pass that repairs degraded chunks re-summarizes it from its events.
        log.error("chunk file %s: summary failed its checksum; read as degraded", path.name)
        text = (
            f"[summary lost: it failed its checksum; seq {entry.first_seq}-{entry.last_seq}; "
            "recall the chunk for details]"
        )
        lost = msgspec.structs.replace(entry, summary=text, degraded=True, summary_crc=None)
        return ChunkFile(lost, result.events, summary_damaged=True)
    return ChunkFile(intact, result.events)


def restore_header(storage: Storage, layout: Layout, entry: ChunkEntry) -> None:
    """Rewrite the header of ``entry``'s chunk file from ``entry``, its events kept byte for byte.

    Repairs a damaged summary in a header; the caller has verified the file's events against ``entry.sha256``.
    """
    path = layout.chunk_file(entry.chunk_id)
    raw = path.read_bytes()
    body = raw[raw.find(b"\n") + 1 :]
    storage.write_atomic(path, _header_line(entry) + body, crash_prefix="chunk")


# --- the index -----------------------------------------------------------------

def _yaml() -> Any:
    # PyYAML is slow to import; the index is only touched once memory is open.
    import yaml

    return yaml


def load_index(layout: Layout) -> ChunkIndex | None:
    """Load index.yaml; ``None`` when absent; :class:`CorruptionError` when present but invalid."""
    try:
        raw = layout.index.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptionError(f"index.yaml unreadable: {exc.strerror}") from exc
    yaml = _yaml()
    try:
        # Aliases make "billion laughs" bombs possible and our writer never emits
        # them, so any anchor or alias marks the file as not ours.
        for event in yaml.parse(raw, Loader=yaml.CSafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise CorruptionError("index.yaml contains YAML anchors/aliases")
        data = yaml.load(raw, Loader=yaml.CSafeLoader)
        index = msgspec.convert(data, ChunkIndex)
    except CorruptionError:
        raise
    except (yaml.YAMLError, msgspec.ValidationError, ValueError, TypeError) as exc:
        raise CorruptionError(f"index.yaml invalid: {exc}") from exc
    live: list[ChunkEntry] = []
    for entry in index.chunks:
        try:
            validate_id(entry.chunk_id, what="chunk id")
        except InvalidIdError as exc:
            raise CorruptionError(f"index.yaml: {exc}") from exc
        intact = _verified(entry)
        if intact is None:
            raise CorruptionError(f"index.yaml: the summary of chunk {entry.chunk_id} failed its checksum")
        live.append(intact)
    rolling_crc = index.rolling_summary_crc
    if rolling_crc is not None and rolling_crc != _crc(index.rolling_summary):
        raise CorruptionError("index.yaml: the rolling summary failed its checksum")
    for seg in index.segments:
        try:
            validate_id(seg.file.removesuffix(".jsonl"), what="segment file")
        except InvalidIdError as exc:
            raise CorruptionError(f"index.yaml: {exc}") from exc
    return msgspec.structs.replace(index, chunks=live, rolling_summary_crc=None)


def save_index(storage: Storage, layout: Layout, index: ChunkIndex) -> None:
    """Atomically write index.yaml: the rename plus the fsync of ``chunks/`` is the commit point."""
    yaml = _yaml()
    index = msgspec.structs.replace(
        index,
        chunks=[_stamped(e) for e in index.chunks],
        rolling_summary_crc=_crc(index.rolling_summary),
    )
    data = yaml.dump(
        msgspec.to_builtins(index), Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True
    ).encode("utf-8")
    storage.mkdir(layout.chunks)
    storage.write_atomic(layout.index, data, crash_prefix="index")


def segment_name(first_seq: int, last_seq: int) -> str:
    """File name of a sealed segment."""
    return f"segment-{first_seq:010d}-{last_seq:010d}.jsonl"


def seal_segments(storage: Storage, layout: Layout, index: ChunkIndex, *, keep_live: int) -> ChunkIndex:
    """Move the oldest live entries into immutable segment files while more than ``keep_live + SEGMENT_SIZE`` are live.

    Written before the index referencing them; recovery deletes unreferenced ones.
    """

    def write(name: str, body: bytes) -> None:
        storage.write_atomic(layout.chunks / name, body, crash_prefix="segment")

    return sealed_index(index, keep_live, lambda e: _json.encode(_stamped(e)), write)


def sealed_index(
    index: ChunkIndex,
    keep_live: int,
    encode: Callable[[ChunkEntry], bytes],
    write: Callable[[str, bytes], None] | None = None,
) -> ChunkIndex:
    """``index`` with its oldest live entries moved into segment references, each entry a line ``encode(entry)``.

    ``write(name, body)`` stores each segment before its reference is made (PostgreSQL keeps the entries as rows).
    """
    chunks = list(index.chunks)
    segments = list(index.segments)
    while len(chunks) > keep_live + SEGMENT_SIZE:
        sealed, chunks = chunks[:SEGMENT_SIZE], chunks[SEGMENT_SIZE:]
        body = b"".join(encode(e) + b"\n" for e in sealed)
        name = segment_name(sealed[0].first_seq, sealed[-1].last_seq)
        if write is not None:
            write(name, body)
        segments.append(
            SegmentRef(
                file=name,
                chunks=len(sealed),
                first_seq=sealed[0].first_seq,
                last_seq=sealed[-1].last_seq,
                sha256=hashlib.sha256(body).hexdigest(),
            )
        )
    return msgspec.structs.replace(index, chunks=chunks, segments=segments)


def read_segment(layout: Layout, seg: SegmentRef) -> list[ChunkEntry]:
    """Read a sealed segment and verify its checksum."""
    path = layout.chunks / seg.file
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise CorruptionError(f"segment {seg.file} unreadable: {exc.strerror}") from exc
    if hashlib.sha256(body).hexdigest() != seg.sha256:
        raise CorruptionError(f"segment {seg.file}: checksum mismatch")
    try:
        entries = [_entry_dec.decode(line) for line in body.splitlines() if line.strip()]
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"segment {seg.file}: {exc}") from exc
    intact = [_verified(e) for e in entries]
    if None in intact:
        raise CorruptionError(f"segment {seg.file}: a summary failed its checksum")
    return [e for e in intact if e is not None]


def load_all_entries(layout: Layout, index: ChunkIndex) -> list[ChunkEntry]:
    """Every committed chunk entry, oldest first (segments then live entries)."""
    return [*(e for seg in index.segments for e in read_segment(layout, seg)), *index.chunks]


def list_chunk_files(layout: Layout) -> list[str]:
    """Chunk ids of every ``chunks/*.jsonl`` that looks like a chunk file (segments excluded)."""
    try:
        names = os.listdir(layout.chunks)
    except FileNotFoundError:
        return []
    out = []
    for name in sorted(names):
        if name.endswith(".jsonl") and not name.startswith("segment-"):
            stem = name[: -len(".jsonl")]
            try:
                out.append(validate_id(stem))
            except InvalidIdError:
                continue
    return out


# --- the index as compaction advances it, and summary.md ------------------------------

ARCHIVE_HEADER = "# Session History Archive (chunk summaries pushed out of Recent Chunks)\n"
TRUNCATION_MARKER = "[... older rolling summary lines truncated ...]"


def render_summary_md(index: ChunkIndex, recent: Sequence[ChunkEntry]) -> str:
    """The whole summary.md for ``index`` with ``recent`` as the Recent Chunks entries (rendered by policy)."""
    return summary_md.render_summary(
        index.rolling_summary, [(e.chunk_id, e.summary, e.degraded) for e in recent]
    )


def render_archive_entries(entries: Sequence[ChunkEntry]) -> str:
    """Archive text for entries pushed out of Recent Chunks."""
    return "".join(summary_md.render_entry(e.chunk_id, e.summary, degraded=e.degraded) + "\n" for e in entries)


RollingFold = Callable[[str, str, int], str]
"""How a summary pushed out of Recent Chunks joins the rolling summary: ``fold(rolling, summary, max_lines)``
is the merged text, which may exceed ``max_lines`` (the caller decides what then). The compaction side
passes the embedded summarizer's section-wise fold (``aiden.summarizers.extractive.summarizer.rolling_fold``)."""


def append_lines(rolling: str, summary: str, max_lines: int) -> str:
    """The fold that runs no summarizer: ``summary`` below ``rolling``, nothing merged.

    Recovery's, re-deriving the rolling summary of a rebuilt index (storage runs no summarizer).
    """
    return "\n".join(part for part in (rolling.strip(), summary.strip()) if part)


def fold_into_rolling(
    rolling: str, entry: ChunkEntry, *, max_lines: int, fold: RollingFold
) -> tuple[str, bool]:
    """Merge ``entry``'s summary into the rolling summary with ``fold``; returns (text, over ``max_lines``)."""
    text = fold(rolling, entry.summary, max_lines).strip() if entry.summary.strip() else rolling.strip()
    return text, len(text.splitlines()) > max_lines


def cap_lines(rolling: str, *, max_lines: int, keep_head: bool = False) -> str:
    """Cut ``rolling`` to ``max_lines`` and mark the truncation.

    The accumulating rolling summary drops its oldest lines; a folded
    checkpoint (``keep_head=True``) is ordered by importance, so its tail goes.
    """
    lines = [ln for ln in rolling.strip().splitlines() if ln != TRUNCATION_MARKER]
    if len(lines) <= max_lines:
        return "\n".join(lines)
    if max_lines <= 1:
        return TRUNCATION_MARKER
    if keep_head:
        return "\n".join([*lines[: max_lines - 1], TRUNCATION_MARKER])
    return "\n".join([TRUNCATION_MARKER, *lines[len(lines) - (max_lines - 1) :]])


def advance_index(
    index: ChunkIndex, entry: ChunkEntry, *, max_chunks: int, max_lines: int, fold: RollingFold
) -> tuple[ChunkIndex, list[ChunkEntry], bool]:
    """The index after appending ``entry``: returns (index, entries pushed out of Recent Chunks, rolling over cap).

    Pushed-out entries fold into the rolling summary; over ``max_lines`` the
    caller folds it through the summarizer, and :func:`cap_lines` is the backstop.
    """
    chunks = [*index.chunks, entry]
    total = index.total_chunks + 1
    rolling = index.rolling_summary
    rolled = max(index.rolled_count, total - max_chunks)
    pushed: list[ChunkEntry] = []
    over = False
    # Live entries are the newest ``len(chunks)`` of ``total``: positions among them of
    # the entries rolled now (one sealed away already is only counted).
    first_live = total - len(chunks)
    for pos in range(index.rolled_count - first_live, rolled - first_live):
        if 0 <= pos < len(chunks):
            pushed.append(chunks[pos])
            rolling, over_now = fold_into_rolling(rolling, chunks[pos], max_lines=max_lines, fold=fold)
            over = over or over_now
    new = ChunkIndex(
        version=index.version,
        rolling_summary=rolling,
        rolled_count=rolled,
        total_chunks=total,
        segments=list(index.segments),
        chunks=chunks,
    )
    return new, pushed, over


def raw_breadcrumb(texts: Sequence[str], *, first_seq: int, last_seq: int, max_chars: int) -> str:
    """A bounded raw excerpt used when summarization failed and the fallback is ``breadcrumb``."""
    head = f"[raw breadcrumb: summarization failed for seq {first_seq}-{last_seq}; recall the chunk for details]\n"
    body = "\n".join(" ".join(t.split())[:200] for t in texts if t.strip())
    room = max(0, max_chars - len(head))
    return head + (body[:room] if len(body) > room else body)
