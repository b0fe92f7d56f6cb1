"""Read-only views of a memory root for the ``aiden`` command: inspect, export, recall, doctor.

Nothing here opens the memory (no :func:`aiden.open_memory`, no lock, no
recovery) or writes under the root, so every function works on a read-only
root and while another process has the memory open.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiden.errors import AidenError, CorruptionError
from aiden.events import SessionEvent, encode_event
from aiden.recall.types import RecallHit
from aiden.storage import chunks as cs
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout

__all__ = [
    "RootError",
    "check_events",
    "doctor",
    "export_lines",
    "has_memory",
    "inspect_root",
    "open_layout",
    "read_all_events",
    "recall",
]


class RootError(Exception):
    """The given root does not exist or holds no memory."""


def has_memory(root: str | os.PathLike[str]) -> bool:
    """True if ``<root>/memory/`` exists and is not empty."""
    memory = Path(os.fspath(root)) / "memory"
    try:
        return memory.is_dir() and any(memory.iterdir())
    except OSError:
        return True  # unreadable: treat as holding something, never overwrite it


def open_layout(root: str | os.PathLike[str]) -> Layout:
    """The :class:`Layout` of an existing memory root; :class:`RootError` when there is none."""
    path = Path(os.fspath(root))
    if not path.is_dir():
        raise RootError(f"memory root {os.fspath(root)!r} does not exist or is not a directory")
    layout = Layout(path)
    if not layout.memory.is_dir():
        raise RootError(f"no memory under {os.fspath(root)!r} (expected a memory/ directory)")
    return layout


def _index(layout: Layout) -> tuple[cs.ChunkIndex, list[cs.ChunkEntry]]:
    index = cs.load_index(layout) or cs.ChunkIndex()
    return index, cs.load_all_entries(layout, index)


def _hot(layout: Layout, index: cs.ChunkIndex, entries: list[cs.ChunkEntry]) -> list[SessionEvent]:
    # As SessionStore.read_hot_window: events a committed chunk covers (an
    # interrupted trim) are left out, and a torn tail is ignored.
    events = scan(read_bytes(layout.events)).events
    last = index.last_seq
    return [e for e in events if e.seq > last or not cs.covered(entries, e.seq)]


def read_all_events(layout: Layout) -> list[SessionEvent]:
    """Every stored event in seq order: compacted chunks (verified), then the hot window."""
    index, entries = _index(layout)
    out: list[SessionEvent] = []
    for entry in entries:
        out.extend(cs.read_chunk(layout, entry.chunk_id, expect_sha256=entry.sha256).events)
    out.extend(_hot(layout, index, entries))
    out.sort(key=lambda e: e.seq)
    return out


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _files(layout: Layout) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for dirpath, _dirs, names in os.walk(layout.memory):
        for name in sorted(names):
            path = Path(dirpath) / name
            size = _size(path)
            if size is not None:
                sizes[str(path.relative_to(layout.memory))] = size
    return dict(sorted(sizes.items()))


def inspect_root(root: str | os.PathLike[str]) -> dict[str, Any]:
    """A summary of what the root holds, as plain JSON-able data. Read-only."""
    layout = open_layout(root)
    problems: list[str] = []
    try:
        index, entries = _index(layout)
    except CorruptionError as exc:
        problems.append(str(exc))
        index, entries = cs.ChunkIndex(), []
    hot = _hot(layout, index, entries)
    memories = layout.long_term / "memories"
    long_term = sorted(memories.glob("*.md")) if memories.is_dir() else []
    session_meta: Any = None
    raw_meta = read_bytes(layout.session_meta)
    if raw_meta:
        try:
            session_meta = json.loads(raw_meta)
        except ValueError:
            problems.append("session.json is not valid JSON")
    return {
        "root": str(layout.root),
        "hot_window": {
            "events": len(hot),
            "first_seq": hot[0].seq if hot else None,
            "last_seq": hot[-1].seq if hot else None,
        },
        "chunks": {
            "count": len(entries),
            "live": len(index.chunks),
            "segments": len(index.segments),
            "first_seq": entries[0].first_seq if entries else None,
            "last_seq": entries[-1].last_seq if entries else None,
            "events": sum(e.count for e in entries),
        },
        "summary_md_bytes": _size(layout.summary) or 0,
        "session": session_meta,
        "last_recovery": None,  # recovery reports are logged and returned by open_memory, not stored
        "long_term_entries": len(long_term),
        "files": _files(layout),
        "problems": problems,
    }


def export_lines(root: str | os.PathLike[str], fmt: str = "jsonl") -> Iterator[str]:
    """Every event as one JSON line (``jsonl``) or as OpenAI chat messages (``openai``), one per line."""
    layout = open_layout(root)
    events = read_all_events(layout)
    if fmt == "jsonl":
        for event in events:
            yield encode_event(event).decode("utf-8").rstrip("\n")
    elif fmt == "openai":
        from aiden.context import events_to_messages

        messages, _repairs = events_to_messages(events)
        for message in messages:
            yield json.dumps(message, ensure_ascii=False)
    else:
        raise ValueError(f"unknown export format {fmt!r} (jsonl or openai)")


def recall(root: str | os.PathLike[str], query: str, *, k: int | None = None) -> list[RecallHit]:
    """Search the root's compacted events with an index built in a temp dir (the root is not written)."""
    from aiden.config import Config
    from aiden.recall.index import BulkChunk, RecallIndex

    layout = open_layout(root)
    entries = _index(layout)[1]
    bulk = [
        BulkChunk(
            chunk_id=e.chunk_id,
            sha256=e.sha256,
            summary=e.summary,
            events=cs.read_chunk(layout, e.chunk_id, expect_sha256=e.sha256).events,
            degraded=e.degraded,
        )
        for e in entries
    ]
    with tempfile.TemporaryDirectory(prefix="aiden-recall-") as tmp:
        tmp_layout = Layout(tmp)
        tmp_layout.session.mkdir(parents=True)
        index = RecallIndex(tmp_layout, Config())
        try:
            index.bulk_load(bulk)
            return index.search(query, k=k)
        finally:
            index.close()


def check_events(layout: Layout) -> list[str]:
    """Problems of ``events.jsonl``: corrupt lines, a torn tail, seqs out of order."""
    problems: list[str] = []
    result = scan(read_bytes(layout.events))
    for bad in result.bad_lines:
        problems.append(f"events.jsonl: corrupt line at offset {bad.offset}: {bad.error}")
    if result.torn_tail:
        problems.append(
            f"events.jsonl: torn tail of {len(result.torn_tail)} bytes at offset {result.complete_end}"
        )
    seqs = [e.seq for e in result.events]
    if seqs != sorted(set(seqs)):
        problems.append("events.jsonl: seqs out of order or duplicated")
    return problems


def doctor(root: str | os.PathLike[str]) -> list[str]:
    """Every problem found, one line each (empty when clean): index, segments, chunk files, hot window."""
    layout = open_layout(root)
    problems: list[str] = []
    try:
        index = cs.load_index(layout) or cs.ChunkIndex()
    except CorruptionError as exc:
        problems.append(str(exc))
        index = cs.ChunkIndex()
    entries: list[cs.ChunkEntry] = []
    for seg in index.segments:
        try:
            entries.extend(cs.read_segment(layout, seg))
        except CorruptionError as exc:
            problems.append(str(exc))
    entries.extend(index.chunks)
    listed = set()
    previous = 0
    seqs: list[int] = []
    clean = not problems
    for entry in entries:
        listed.add(entry.chunk_id)
        if entry.first_seq <= previous:
            problems.append(f"index.yaml: chunk {entry.chunk_id} overlaps the chunk before it")
        previous = entry.last_seq
        try:
            seqs.extend(
                e.seq for e in cs.read_chunk(layout, entry.chunk_id, expect_sha256=entry.sha256).events
            )
        except AidenError as exc:
            problems.append(str(exc))
            clean = False
    for chunk_id in cs.list_chunk_files(layout):
        if chunk_id not in listed:
            problems.append(f"chunk file {chunk_id}.jsonl is not in index.yaml (orphan)")
    problems.extend(check_events(layout))
    seqs.extend(e.seq for e in _hot(layout, index, entries))
    if clean and seqs:
        missing = sorted(set(range(1, max(seqs) + 1)) - set(seqs))
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (", ..." if len(missing) > 10 else "")
            problems.append(f"{len(missing)} seqs stored nowhere (chunks or hot window): {shown}")
    return [" ".join(p.split()) for p in problems]  # one line each
