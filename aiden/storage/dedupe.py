"""Seq and event-id facts that must outlive ``events.jsonl``.

Compaction moves events out of the hot window into chunk files and a crash or
an operator can empty the log, so two facts cannot be derived from the log
alone:

* which ``event_id`` values are already stored (the dedupe contract says a
  known id returns the stored event, also after it was compacted), and
* the highest seq ever assigned (a lost hot window must be reported, and its
  seqs must never be handed out again).

The first is read from committed chunk files; the second is a tiny
high-water-mark file written by each compaction trim (atomic replace through
the Storage seam), which is the only point where the log is rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from aiden.errors import AidenError, CorruptionError
from aiden.events import SessionEvent
from aiden.storage import chunks as cs
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout

__all__ = ["chunk_event_ids", "describe_ranges", "lost_seqs", "read_high_water", "write_high_water"]

HIGH_WATER_NAME = "seq_high_water"


def _high_water_path(layout: Layout) -> Path:
    return layout.session / HIGH_WATER_NAME


def read_high_water(layout: Layout) -> int:
    """The highest seq a compaction trim saw (0 when unknown or unreadable)."""
    raw = read_bytes(_high_water_path(layout)).strip()
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0  # a damaged mark only weakens loss detection; the chunks still give a floor


def write_high_water(storage: Storage, layout: Layout, seq: int) -> None:
    """Persist ``seq`` as the high-water mark if it raises the stored one."""
    if seq > read_high_water(layout):
        storage.write_atomic(_high_water_path(layout), f"{seq}\n".encode(), crash_prefix="high_water")


def chunk_event_ids(
    layout: Layout, index: cs.ChunkIndex | None, seen: set[str], limit: int
) -> list[tuple[str, int]]:
    """``(event_id, seq)`` of ``index``'s committed chunks not in ``seen``, newest chunks first.

    Stops once ``limit`` ids were collected (the dedupe window bounds memory and
    reading time); every chunk read is added to ``seen`` so a later call only
    reads newly committed chunks. The caller loaded ``index`` (once per change).
    """
    if limit <= 0 or index is None:
        return []
    try:
        entries = cs.load_all_entries(layout, index)
    except (CorruptionError, AidenError):
        return []  # recovery rebuilds the index; dedupe then learns on the next resync
    found: list[tuple[str, int]] = []
    for entry in reversed(entries):
        if len(found) >= limit:
            break
        if entry.chunk_id in seen:
            continue
        try:
            chunk = cs.read_chunk(layout, entry.chunk_id)
        except (CorruptionError, AidenError, OSError):
            continue  # unreadable chunks are reported by recovery
        seen.add(entry.chunk_id)
        found.extend((e.event_id, e.seq) for e in chunk.events if e.event_id is not None)
    return found


def lost_seqs(entries: Sequence[cs.ChunkEntry], hot: Iterable[SessionEvent], high_water: int) -> list[int]:
    """Seqs up to the known maximum that neither a chunk nor the hot window holds.

    Seqs are assigned gap-free, so every seq in ``1..max(last chunk, high water)``
    lives in exactly one place; a seq found nowhere was lost. Only gaps between
    ranges are walked, so the cost is the size of the loss, not of the session.
    """
    hot_seqs = {e.seq for e in hot}
    ordered = sorted(entries, key=lambda e: e.first_seq)
    top = max([high_water, *(e.last_seq for e in ordered)])
    missing: list[int] = []
    nxt = 1
    for e in ordered:
        missing.extend(s for s in range(nxt, e.first_seq) if s not in hot_seqs)
        missing.extend(s for s in e.kept_seqs if s not in hot_seqs)
        nxt = max(nxt, e.last_seq + 1)
    missing.extend(s for s in range(nxt, top + 1) if s not in hot_seqs)
    return sorted(set(missing))


def describe_ranges(seqs: Sequence[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``"1-3, 7"`` (seqs sorted)."""
    parts: list[str] = []
    start = prev = None
    for s in seqs:
        if prev is not None and s == prev + 1:
            prev = s
            continue
        if start is not None:
            parts.append(f"{start}-{prev}" if start != prev else f"{start}")
        start = prev = s
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ", ".join(parts)
