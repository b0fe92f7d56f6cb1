"""What a tool result says about its success (pure): its metadata, and the words that state a failure.

**Metadata.** The extractive summarizer (which errors to keep) and the experience
learner (which attempts failed) read the same keys the way agent frameworks set
them: ``is_error`` (Anthropic, MCP), ``error``, ``status: "error"`` (LangChain's
ToolMessage), a process ``exit_code`` / ``returncode``, an HTTP ``status_code``.

**Words.** :data:`NONZERO_EXIT` and :data:`OS_REFUSAL` are the phrases every text
rule shares. Each reader anchors them for its own question, and the anchors differ
on purpose: the experience learner at the start of a result (the result *is* a
failure report), the extractive summarizer's tool rules within a line (strong
evidence), the must-keep classifier anywhere, word-bounded (a mention). Both
patterns carry their own case-insensitive flag, so they mean the same in every reader.
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
