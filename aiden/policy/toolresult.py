"""What a tool result says about its success (pure): its metadata, and the words that state a failure.

:func:`reported_failure` reads the keys agent frameworks set (``is_error``, ``error``,
``status: "error"``, ``exit_code``/``returncode``, HTTP ``status_code``). :data:`NONZERO_EXIT` and
:data:`OS_REFUSAL` are the failure phrases every text rule shares; each reader anchors them
differently on purpose (start of a result, within a line, anywhere), so they carry their own
case-insensitive flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["NONZERO_EXIT", "OS_REFUSAL", "reported_failure"]

NONZERO_EXIT: Final = r"(?i:\bexit(?:ed)?\s+(?:with\s+)?(?:code|status)\s*[:=]?\s*[1-9]\d*\b)"
"""A stated non-zero exit: ``exit code 2``, ``exited with status 1``, ``Exit status: 127``."""
OS_REFUSAL: Final = r"(?i:permission denied|connection refused)"
"""The operating system's refusals (``EACCES``, ``ECONNREFUSED``) in any case (Go lowercases them)."""

_EXIT_KEYS: Final = ("exit_code", "returncode", "status_code")


def reported_failure(meta: Mapping[str, Any]) -> bool | None:
    """True when ``meta`` reports a failure, False when it reports success (an exit or
    status code that is not one), None when it says nothing either way."""
    if meta.get("is_error") is True or meta.get("error") not in (None, "", False) or meta.get("status") == "error":
        return True
    for key in _EXIT_KEYS:
        value = meta.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value >= 400 if key == "status_code" else value != 0
    return None
