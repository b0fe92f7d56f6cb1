"""Advisory records of ``memory/`` for later readers (``aiden inspect``): ``window.json`` and ``last_recovery.json``.

Small JSON files, written atomically and only when they would change. Advisory:
a failed write is logged and never fails the open or close that made it; a
damaged one reads as absent. ``window.json`` keeps the context window (which
lives in the agent's code, not the root) and, from a close, the prompt-size
calibration a reopen with the same model and window starts from.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any, NoReturn

import msgspec

from aiden.errors import StorageError
from aiden.storage.fs import Storage
from aiden.storage.jsonl import read_bytes
from aiden.storage.layout import Layout
from aiden.storage.protocol import RecoveryReport

__all__ = ["PromptCalibration", "read_last_recovery", "read_window", "record_recovery", "record_window"]

log = logging.getLogger("aiden.storage")


# --- memory/window.json ---------------------------------------------------------------


class PromptCalibration(msgspec.Struct, frozen=True, kw_only=True):
    """What reported prompt sizes taught the budget check and the planner, kept across a close."""

    factor: float
    """The budget check's average of ``reported / estimated``."""
    spread: float
    """The budget check's average error around ``factor``."""
    samples: int
    token_factor: float
    """The planner's correction of the estimate for the model."""


def record_window(
    storage: Storage,
    layout: Layout,
    context_window: int,
    model: str | None,
    calibration: PromptCalibration | None = None,
) -> None:
    """Keep ``context_window`` and ``model`` in ``memory/window.json`` unless it already says so.

    Without ``calibration`` (at open) a record of the same window and model is left
    as it is, calibration included; with it (at close) the calibration is kept too.
    """
    record: dict[str, Any] = {"context_window": context_window, "model": model}
    if calibration is not None:
        record["calibration"] = msgspec.to_builtins(calibration)
    data = json.dumps(record, ensure_ascii=False).encode() + b"\n"
    try:
        if not layout.memory.is_dir() or read_bytes(layout.window) == data:
            return
        if calibration is None:
            found = read_window(layout)
            if found is not None and (found["context_window"], found["model"]) == (context_window, model):
                return
        storage.write_atomic(layout.window, data, crash_prefix="window")
    except (StorageError, OSError) as exc:
        log.warning("could not keep the context window in %s: %s", layout.window, exc)


def read_window(layout: Layout) -> dict[str, Any] | None:
    """``{"context_window": int, "model": str | None, "calibration": PromptCalibration | None}`` of the
    last open and close; None if none or unreadable (a damaged calibration reads as None)."""
    try:
        data = json.loads(read_bytes(layout.window) or b"null")
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    window, model = data.get("context_window"), data.get("model")
    if type(window) is not int or window <= 0 or not (model is None or isinstance(model, str)):
        return None
    try:
        calibration = msgspec.convert(data["calibration"], PromptCalibration) if "calibration" in data else None
    except msgspec.ValidationError:
        calibration = None
    if calibration is not None and not (
        0.5 <= calibration.factor <= 2.0 and 0.5 <= calibration.token_factor <= 2.0 and 0.0 <= calibration.spread <= 2.0
    ):
        calibration = None  # outside what calibration ever learns: not ours
    return {"context_window": window, "model": model, "calibration": calibration}


# --- memory/last_recovery.json ----------------------------------------------------------


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


def _not_json(constant: str) -> NoReturn:
    raise ValueError(f"{constant} is not JSON")


def read_last_recovery(layout: Layout) -> dict[str, Any] | None:
    """``{"at": unix time, "report": {...}}`` of the last recovery that found something; None if none or unreadable.

    Damaged reads as absent too: ``at`` not a time a calendar date holds, or a NaN or
    Infinity anywhere (Python's json reads them, but ``inspect --json`` must not write them).
    """
    try:
        data = json.loads(read_bytes(layout.last_recovery) or b"null", parse_constant=_not_json)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("report"), dict):
        return None
    at = data.get("at")
    if isinstance(at, bool) or not isinstance(at, int | float):
        return None
    try:
        datetime.fromtimestamp(at, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return data
