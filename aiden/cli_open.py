"""Opening an existing memory root for the ``aiden`` command's write subcommands.

``compact``, ``memory save|forget`` and ``restore`` go through
:func:`aiden.open_memory` like an agent does (session lock, recovery, actors);
the read subcommands never do (see :mod:`aiden.readonly`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

import msgspec

from aiden.errors import StorageError

if TYPE_CHECKING:
    from aiden.config import Config
    from aiden.memory import Memory

__all__ = ["NotWritableError", "cli_config", "writable_memory"]


class NotWritableError(StorageError):
    """A write subcommand could not open its memory root for writing (read-only, permissions, a held lock)."""


def cli_config(path: str | None) -> Config:
    """The configuration a write subcommand opens with: ``path`` (``load_config``) or the defaults.

    A subcommand is not the end of the agent's session, so closing it writes no
    dated session summary (``session_summary_on_close`` off).
    """
    from aiden.config import Config, load_config

    config = load_config(path) if path else Config()
    return msgspec.structs.replace(config, session_summary_on_close=False)


@asynccontextmanager
async def writable_memory(
    root: str, *, config_path: str | None = None, context_window: int | None = None
) -> AsyncIterator[Memory]:
    """The open memory under an existing ``root``.

    A missing root or one without ``memory/`` is a :class:`~aiden.readonly.RootError`
    (a write subcommand never creates a memory); a root that cannot be written
    is a :class:`NotWritableError` naming the cause. Without ``context_window``
    the memory opens with the window and model the root was last opened with
    (``memory/window.json``), so a command works at the agent's window and
    leaves that record as the agent left it.
    """
    from aiden.memory import open_memory
    from aiden.readonly import open_layout
    from aiden.storage.advisory import read_window

    layout = open_layout(root)
    recorded = read_window(layout) if context_window is None else None
    model = recorded["model"] if recorded is not None else None
    if recorded is not None:
        context_window = recorded["context_window"]
    config = cli_config(config_path)
    async with AsyncExitStack() as stack:
        try:
            memory = await stack.enter_async_context(
                open_memory(root, config=config, model=model, context_window=context_window)
            )
        except (StorageError, OSError) as exc:
            # Opening writes (the lock file, recovery): on a read-only root that is where it fails.
            raise NotWritableError(f"memory root {os.fspath(root)!r} is not writable: {exc}") from exc
        yield memory
