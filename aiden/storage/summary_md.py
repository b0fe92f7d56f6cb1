"""The chunk index as compaction advances it, and its renderings: summary.md and summary_archive.md.

Both files are derived from ``chunks/index.yaml`` (the text: :mod:`aiden.policy.summary_md`),
so recovery can always re-derive them; nothing is stored only here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aiden.policy import summary_md
from aiden.storage.chunks import ChunkEntry, ChunkIndex

__all__ = [
    "ARCHIVE_HEADER",
    "TRUNCATION_MARKER",
    "RollingFold",
    "advance_index",
    "append_lines",
    "raw_breadcrumb",
    "fold_into_rolling",
    "render_archive_entries",
    "cap_lines",
    "render_entry",
    "render_summary_md",
]

ARCHIVE_HEADER = "# Session History Archive (chunk summaries pushed out of Recent Chunks)\n"
TRUNCATION_MARKER = "[... older rolling summary lines truncated ...]"


def render_entry(entry: ChunkEntry) -> str:
    """One ``- **chunk_id**`` entry with its indented summary."""
    return summary_md.render_entry(entry.chunk_id, entry.summary, degraded=entry.degraded)


def render_summary_md(index: ChunkIndex, recent: Sequence[ChunkEntry]) -> str:
    """The whole summary.md for ``index`` with ``recent`` as the Recent Chunks entries (rendered by policy)."""
    return summary_md.render_summary(
        index.rolling_summary, [(e.chunk_id, e.summary, e.degraded) for e in recent]
    )


def render_archive_entries(entries: Sequence[ChunkEntry]) -> str:
    """Archive text for entries pushed out of Recent Chunks."""
    return "".join(render_entry(e) + "\n" for e in entries)


RollingFold = Callable[[str, str, int], str]
"""How a summary pushed out of Recent Chunks joins the rolling summary: ``fold(rolling, summary, max_lines)``
is the merged text, which may exceed ``max_lines`` (the caller decides what then). The compaction side
passes the embedded summarizer's section-wise fold (``aiden.summarizers.extractive.rolling_fold``)."""


def append_lines(rolling: str, summary: str, max_lines: int) -> str:
    """The fold that runs no summarizer: ``summary`` below ``rolling``, nothing merged.

    Recovery's, when it re-derives the rolling summary of an index rebuilt from
    its chunk files (storage runs no summarizer, #36): :func:`cap_lines` keeps
    the newest lines, and the next push's fold merges the text section by
    section again.
    """
    return "\n".join(part for part in (rolling.strip(), summary.strip()) if part)


def fold_into_rolling(
    rolling: str, entry: ChunkEntry, *, max_lines: int, fold: RollingFold
) -> tuple[str, bool]:
    """Merge ``entry``'s summary into the rolling summary with ``fold``; returns (text, over_cap).

    ``over_cap`` tells the caller the merged text exceeds ``max_lines`` and
    should be folded through the configured summarizer; :func:`cap_lines` is
    the hard backstop.
    """
    text = fold(rolling, entry.summary, max_lines).strip() if entry.summary.strip() else rolling.strip()
    return text, len(text.splitlines()) > max_lines


def cap_lines(rolling: str, *, max_lines: int, keep_head: bool = False) -> str:
    """Cut ``rolling`` to ``max_lines`` and mark the truncation (seed 000's backstop).

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

    Entries pushed out of Recent Chunks are folded into the rolling summary;
    when it exceeds ``max_lines`` the caller folds it through the summarizer
    (a rolling checkpoint) and :func:`cap_lines` remains the hard backstop.
    """
    chunks = [*index.chunks, entry]
    total = index.total_chunks + 1
    rolling = index.rolling_summary
    rolled = index.rolled_count
    pushed: list[ChunkEntry] = []
    over = False
    # Live entries are the newest ``len(chunks)`` of ``total``; the oldest
    # not-yet-rolled one sits at this offset among them.
    first_live = total - len(chunks)
    while total - rolled > max_chunks:
        pos = rolled - first_live
        if pos < 0 or pos >= len(chunks):  # sealed away already: keep counts consistent
            rolled += 1
            continue
        out = chunks[pos]
        pushed.append(out)
        rolling, over_now = fold_into_rolling(rolling, out, max_lines=max_lines, fold=fold)
        over = over or over_now
        rolled += 1
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
