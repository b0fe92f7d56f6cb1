"""What a tool result's metadata says about its success (pure): one rule for every reader.

The extractive summarizer (which errors to keep) and the experience learner
(which attempts failed) read the same keys the way agent frameworks set them:
``is_error`` (Anthropic, MCP), ``error``, ``status: "error"`` (LangChain's
ToolMessage), a process ``exit_code`` / ``returncode``, an HTTP ``status_code``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["reported_failure"]

_EXIT_KEYS: Final = ("exit_code", "returncode", "status_code")


def reported_failure(meta: Mapping[str, Any]) -> bool | None:
    """True when ``meta`` reports a failure, False when it reports success (an exit or
    status code that is not one), None when it says nothing either way."""
    if meta.get("is_error") is True or meta.get("error") not in (None, "", False):
        return True
    if meta.get("status") == "error":
        return True
    for key in _EXIT_KEYS:
        value = meta.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value >= 400 if key == "status_code" else value != 0
    return None
