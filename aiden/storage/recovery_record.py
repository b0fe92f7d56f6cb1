"""The last recovery on open that found something, kept for ``aiden inspect``: ``memory/last_recovery.json``.

A clean open writes nothing (the file keeps the last finding, with its time),
so a healthy agent pays no extra write per open. The file is advisory: failing
to write it is logged and never fails the open whose recovery succeeded.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import msgspec

from aiden.errors import StorageError
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout
from aiden.storage.protocol import RecoveryReport

__all__ = ["read_last_recovery", "record_recovery"]

log = logging.getLogger("aiden.storage")


def record_recovery(storage: Storage, layout: Layout, report: RecoveryReport) -> None:
    """Keep ``report`` in ``memory/last_recovery.json`` if it found or did anything."""
    if report.findings() == RecoveryReport():
        return
    data = {"at": time.time(), "report": msgspec.to_builtins(report.findings())}
    try:
        storage.write_atomic(
            layout.last_recovery,
            json.dumps(data, ensure_ascii=False).encode() + b"\n",
            crash_prefix="last_recovery",
        )
    except (StorageError, OSError) as exc:
        log.warning("could not keep the recovery report in %s: %s", layout.last_recovery, exc)


def read_last_recovery(layout: Layout) -> dict[str, Any] | None:
    """``{"at": unix time, "report": {...}}`` of the last recovery that found something; None if none or unreadable."""
    try:
        raw = read_bytes(layout.last_recovery)
    except OSError:
        return None
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("report"), dict) else None
