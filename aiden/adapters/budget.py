"""What every adapter does with the prompt it hands its framework: never send an overflow silently.

``build_messages`` reports a prompt it could not fit (``PromptBuild.over_budget`` with the
reason) instead of raising; a caller of ``build_messages`` sees the flag, a framework user
does not. Each adapter keeps the last prompt it sent (``last_prompt``) and logs the reason.
"""

from __future__ import annotations

import logging

from aiden.context import PromptBuild

__all__ = ["checked"]

_log = logging.getLogger("aiden.adapters")


def checked(built: PromptBuild, adapter: str) -> PromptBuild:
    """``built``, after logging a warning naming ``adapter`` when it is over its budget."""
    if built.over_budget:
        _log.warning("%s: the prompt sent is over aiden's budget: %s", adapter, built.over_budget_reason)
    return built
