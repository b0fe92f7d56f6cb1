"""``aiden doctor --repair``: the repairs a check can only report, made (writes).

Opening the memory as an agent does runs recovery, which repairs the session
files (what doctor's recovery dry run predicts); the Dream version history
(``long_term/.git``) is then repaired under Dream's own ``.dream.lock``, so no
Dream commits meanwhile (:func:`aiden.longterm.gitcheck.repair_history`).
Refused, like every write subcommand, on a root that cannot be written.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from aiden.storage.protocol import RecoveryReport

__all__ = ["repair_root"]


def _recovery_lines(report: RecoveryReport) -> list[str]:
    from aiden.doctor import recovery_actions

    lines = [f"recovery at open: {what}" for what in (*recovery_actions(report), *report.unrecoverable)]
    return [" ".join(line.split()) for line in lines]


async def repair_root(root: str, *, config_path: str | None = None) -> list[str]:
    """Repair ``root``; one line per repair made, in order ([] when nothing needed one)."""
    from aiden.cli_open import writable_memory
    from aiden.errors import DreamError
    from aiden.longterm.dream import DREAM_LOCK_NAME
    from aiden.longterm.gitcheck import repair_history
    from aiden.storage.fs import Storage
    from aiden.storage.layout import Layout
    from aiden.storage.locks import SessionLock

    async with writable_memory(root, config_path=config_path) as memory:
        lines = _recovery_lines(memory.recovery)
        layout, storage = Layout(memory.root), Storage()
        if not (layout.long_term / ".git").exists() and not (layout.long_term / ".git").is_symlink():
            return lines  # never dreamed: no history to repair
        flock = SessionLock(storage, layout.dream_lock)
        if not await anyio.to_thread.run_sync(flock.try_acquire):
            raise DreamError(f"another process is running Dream ({DREAM_LOCK_NAME} is held): repair refused")
        try:
            repaired = await anyio.to_thread.run_sync(
                lambda: repair_history(layout.long_term, storage, now=time.time())
            )
        finally:
            await anyio.to_thread.run_sync(flock.release)
        return [*lines, *repaired]
