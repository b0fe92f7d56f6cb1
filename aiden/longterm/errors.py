"""Errors of the long-term memory package, rooted at :class:`~aiden.errors.AidenError`.

::

    AidenError
    └── LongTermError             long-term memory failure
        ├── MemoryEntryError      a save/forget request or a memory entry is invalid
        └── DreamError            a Dream run, log or restore failed
            └── VersionNotFoundError  restore target is not a known version
"""

from __future__ import annotations

from aiden.errors import AidenError

__all__ = ["DreamError", "LongTermError", "MemoryEntryError", "VersionNotFoundError"]


class LongTermError(AidenError):
    """Root of the long-term memory errors."""


class MemoryEntryError(LongTermError):
    """A memory entry (or the arguments to make one) is invalid; nothing was written."""


class DreamError(LongTermError):
    """A Dream run, log or restore failed; the cursor and the long-term files are unchanged."""


class VersionNotFoundError(DreamError):
    """The requested version is not in the long-term git history."""
