"""The context window a memory root was last opened with, kept for ``aiden inspect``: ``memory/window.json``.

The window lives in the agent's code (``open_memory(model=..., context_window=...)``),
not in the root, so a command reading the root later would have to guess it. The
open writes it only when it changed (a reopen with the same window writes
nothing). The file is advisory: failing to write it is logged and never fails
the open, and a damaged one reads as absent.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiden.errors import StorageError
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout

__all__ = ["read_window", "record_window"]

log = logging.getLogger("aiden.storage")


def _encode(context_window: int, model: str | None) -> bytes:
    return json.dumps({"context_window": context_window, "model": model}, ensure_ascii=False).encode() + b"\n"


def record_window(storage: Storage, layout: Layout, context_window: int, model: str | None) -> None:
    """Keep ``context_window`` and ``model`` in ``memory/window.json`` unless it already says so."""
    data = _encode(context_window, model)
    try:
        if not layout.memory.is_dir() or read_bytes(layout.window) == data:
            return
        storage.write_atomic(layout.window, data, crash_prefix="window")
    except (StorageError, OSError) as exc:
        log.warning("could not keep the context window in %s: %s", layout.window, exc)


def read_window(layout: Layout) -> dict[str, Any] | None:
    """``{"context_window": int, "model": str | None}`` of the last open; None if none or unreadable."""
    try:
        data = json.loads(read_bytes(layout.window) or b"null")
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    window, model = data.get("context_window"), data.get("model")
    if type(window) is not int or window <= 0 or not (model is None or isinstance(model, str)):
        return None
    return {"context_window": window, "model": model}
