"""Errors of the long-term memory package, rooted at :class:`~aiden.errors.AidenError`.

::

    AidenError
    └── LongTermError             long-term memory failure
        ├── MemoryEntryError      a save/forget request or a memory entry is invalid
        └── DreamError            a Dream run, log or restore failed
            ├── VersionNotFoundError  restore target is not a known version
            └── GitCorruptionError    ``long_term/.git`` is damaged (also a CorruptionError)
"""

from __future__ import annotations

from aiden.errors import AidenError, CorruptionError

__all__ = ["DreamError", "GitCorruptionError", "LongTermError", "MemoryEntryError", "VersionNotFoundError"]


class LongTermError(AidenError):
    """Root of the long-term memory errors."""


class MemoryEntryError(LongTermError):
    """A memory entry (or the arguments to make one) is invalid; nothing was written."""


class DreamError(LongTermError):
    """A Dream run, log or restore failed; the cursor and the long-term files are unchanged."""


class VersionNotFoundError(DreamError):
    """The requested version is not in the long-term git history."""


class GitCorruptionError(DreamError, CorruptionError):
    """``long_term/.git`` is unreadable or damaged; the long-term files themselves are untouched.

    A :class:`DreamError` so Dream's callers handle it like any failed run, and a
    :class:`~aiden.errors.CorruptionError` so it is classified as damaged storage.
    """
