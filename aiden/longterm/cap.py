"""Store cap (seed 004, step 4): the newest N session summaries plus one rolling digest.

When more than ``keep`` session summaries exist, the oldest are merged into
``long_term/digest.md`` (same schema, deduplicated, most recent wins) and then
deleted. Order and crash safety: the digest — carrying the watermark
``through`` (the stem of the newest summary merged) — is written atomically
*before* any original is deleted. A crash in between leaves originals that the
digest already holds; the next run sees their stems at or below ``through``
and only deletes them, so a re-run never merges an old summary over newer
digest content.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from aiden.longterm.files import digest_path, list_session_files, read_summary, write_summary
from aiden.longterm.merge import DEFAULT_MAX_ITEMS, merge_summaries
from aiden.longterm.summaries import SessionSummary
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

__all__ = ["CapPlan", "CapResult", "enforce_cap", "folded_digest", "plan_cap"]


class CapPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`enforce_cap` will do: stems to merge into the digest, stems only to delete."""

    merge: tuple[str, ...] = ()
    delete_only: tuple[str, ...] = ()


class CapResult(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`enforce_cap` did."""

    merged: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    digest_written: bool = False


def plan_cap(stems: Sequence[str], *, keep: int, through: str) -> CapPlan:
    """Pure: which of ``stems`` (any order) to merge or just delete so that ``keep`` remain.

    Stems sort chronologically (they start with the UTC stamp). Those beyond
    the newest ``keep`` are merged, except those at or below the digest's
    watermark ``through``, which it already holds (a crash left them behind).
    """
    if keep < 0:
        raise ValueError("keep must be >= 0")
    ordered = sorted(stems)
    excess = ordered[: max(0, len(ordered) - keep)]
    merge = tuple(s for s in excess if not through or s > through)
    delete_only = tuple(s for s in excess if through and s <= through)
    return CapPlan(merge=merge, delete_only=delete_only)


def folded_digest(
    digest: SessionSummary, summaries: Iterable[SessionSummary], *, through: str, now: int, max_items: int
) -> SessionSummary:
    """Pure: ``digest`` with ``summaries`` merged in (oldest first: later ones win), watermarked ``through``."""
    for summary in summaries:
        digest = merge_summaries(digest, summary, max_items=max_items)
    return msgspec.structs.replace(
        digest, kind="digest", session_id="digest", created_at=now, through=through, through_seq=0
    )


def enforce_cap(
    layout: Layout, storage: Storage, *, keep: int, now: int, max_items: int = DEFAULT_MAX_ITEMS
) -> CapResult:
    """Apply :func:`plan_cap` to ``long_term/sessions/`` (blocking I/O; run in a worker thread)."""
    files = {p.stem: p for p in list_session_files(layout)}
    path = digest_path(layout)
    digest = read_summary(path, kind="digest") or SessionSummary(kind="digest", session_id="digest")
    plan = plan_cap(list(files), keep=keep, through=digest.through)
    if not plan.merge and not plan.delete_only:
        return CapResult()
    written = False
    if plan.merge:
        found = (read_summary(files[stem], kind="session") for stem in plan.merge)
        summaries = [summary for summary in found if summary is not None]
        digest = folded_digest(digest, summaries, through=plan.merge[-1], now=now, max_items=max_items)
        storage.checkpoint("digest.before_write")
        write_summary(storage, path, digest)
        written = True
        storage.checkpoint("digest.after_write")
    deleted = (*plan.delete_only, *plan.merge)
    for stem in deleted:
        storage.unlink(files[stem])
    storage.fsync_dir(files[deleted[0]].parent)
    return CapResult(merged=plan.merge, deleted=tuple(sorted(deleted)), digest_written=written)
