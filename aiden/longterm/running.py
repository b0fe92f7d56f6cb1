"""The running summary's merge rules, shared by every summary backend (pure but for fresh ids).

:func:`merged_running` is a pre-compaction merge; :func:`session_ending` is a
session end or checkpoint, which also yields the dated session summary. The
backends (:class:`~aiden.longterm.writer.SessionSummaryWriter` on files,
:class:`~aiden.longterm.postgres.summaries.PgSummaryStore` on rows) only read
and write what these return.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import msgspec

from aiden.longterm.merge import merge_summaries
from aiden.longterm.summaries import SessionSummary

__all__ = ["merged_running", "session_ending"]


def _new_session_id() -> str:
    return secrets.token_hex(4)


def merged_running(
    current: SessionSummary | None, found: SessionSummary, *, top: int, stamp: int, max_items: int
) -> SessionSummary:
    """The running summary after merging ``found`` (events up to seq ``top``) into ``current``."""
    through = current.through_seq if current is not None else 0
    base = current or SessionSummary(kind="running", session_id=_new_session_id(), created_at=stamp)
    merged = merge_summaries(base, found, max_items=max_items)
    return msgspec.structs.replace(
        merged,
        kind="running",
        session_id=base.session_id or _new_session_id(),
        created_at=base.created_at or stamp,
        through="",
        through_seq=max(through, top),
    )


def session_ending(
    current: SessionSummary | None,
    found: SessionSummary,
    *,
    seqs: Sequence[int],
    stamp: int,
    max_items: int,
) -> tuple[SessionSummary, SessionSummary | None]:
    """(running, final) at a session end or checkpoint.

    ``final`` is the dated session summary (kind ``session``, the running
    summary's id); ``running`` is the running summary to write back with it.
    ``final`` is None when nothing durable is left: write nothing then
    (``running`` is the empty merge, for the caller's report).
    """
    base = current or SessionSummary(kind="running", session_id=_new_session_id(), created_at=stamp)
    merged = merge_summaries(base, found, max_items=max_items)
    if merged.is_empty:
        return merged, None
    running = msgspec.structs.replace(
        merged,
        kind="running",
        session_id=base.session_id,
        created_at=base.created_at or stamp,
        through_seq=max([base.through_seq, *seqs]),
    )
    final = msgspec.structs.replace(
        merged, kind="session", session_id=base.session_id, created_at=stamp, through="", through_seq=0
    )
    return running, final
