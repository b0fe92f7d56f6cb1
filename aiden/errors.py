"""aiden's exception tree.

Every error aiden raises on purpose derives from :class:`AidenError`; errors
from third-party libraries (litellm, sqlite3, yaml, the OS) are translated at
the boundary where aiden calls them, with the original kept as ``__cause__``.
Cancellation is never translated or swallowed.

::

    AidenError
    ├── ConfigError              extraction.yaml or a config value is invalid
    ├── InvalidEventError        an event was rejected before any byte was written
    │   └── EventTooLargeError   the encoded event exceeds ``max_event_bytes``
    ├── InvalidIdError           a chunk / session id is not a safe identifier
    ├── StorageError             a filesystem operation failed (errno kept)
    │   ├── DurabilityError      fsync failed: the data is NOT acknowledged
    │   └── LockError            the session lock could not be taken
    ├── CorruptionError          on-disk data failed validation (reported, not skipped)
    ├── SummarizerError          summarization failed
    │   ├── SummarizerTimeout    the summarizer exceeded its deadline
    │   ├── SummarizerUnavailable  the circuit breaker is open / provider unreachable
    │   └── InvalidSummaryError  the summarizer returned unusable output
    ├── RecallError              recall index failure or a bad recall query
    ├── CommitConflict           another compactor committed first: the pass is discarded
    ├── LongTermError            long-term memory failure
    │   ├── MemoryEntryError     a save/forget request or a memory entry is invalid
    │   └── DreamError           a Dream run, log or restore failed
    │       ├── VersionNotFoundError  restore target is not a known version
    │       └── GitCorruptionError    ``long_term/.git`` is damaged (also a CorruptionError)
    └── ClosedError              the memory was used after it was closed
"""

from __future__ import annotations

__all__ = [
    "AidenError",
    "ClosedError",
    "CommitConflict",
    "ConfigError",
    "CorruptionError",
    "DreamError",
    "DurabilityError",
    "EventTooLargeError",
    "GitCorruptionError",
    "InvalidEventError",
    "InvalidIdError",
    "InvalidSummaryError",
    "LockError",
    "LongTermError",
    "MemoryEntryError",
    "RecallError",
    "StorageError",
    "SummarizerError",
    "SummarizerTimeout",
    "SummarizerUnavailable",
    "VersionNotFoundError",
]


class AidenError(Exception):
    """Root of every error aiden raises deliberately."""


class ConfigError(AidenError):
    """A configuration file or value is invalid; the message names file, key and expectation."""


class InvalidEventError(AidenError):
    """An event was rejected before any byte of it was written."""


class EventTooLargeError(InvalidEventError):
    """The encoded event is larger than ``Config.max_event_bytes``."""


class InvalidIdError(AidenError):
    """An identifier (chunk id, session id) is not of the safe form ``^[A-Za-z0-9_-]{1,64}$``."""


class StorageError(AidenError):
    """A filesystem operation failed. ``errno`` is kept when the OS reported one."""

    def __init__(self, message: str, *, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class DurabilityError(StorageError):
    """fsync failed. The affected appends were not acknowledged and are never retried into success."""


class LockError(StorageError):
    """The session lock could not be acquired."""


class CorruptionError(AidenError):
    """On-disk data failed validation; raised only where it cannot be recovered and reported."""


class SummarizerError(AidenError):
    """Summarization failed; events and summaries were left unchanged."""


class SummarizerTimeout(SummarizerError):
    """The summarizer did not answer within its deadline."""


class SummarizerUnavailable(SummarizerError):
    """The provider is unreachable or the circuit breaker is open."""


class InvalidSummaryError(SummarizerError):
    """The summarizer's output was empty, an error message, or over its bound."""


class RecallError(AidenError):
    """The recall index failed or a recall request was invalid."""


class ClosedError(AidenError):
    """The memory handle was used after it was closed."""


class CommitConflict(AidenError):
    """Another compactor committed since this pass took its snapshot; the pass is discarded."""


class LongTermError(AidenError):
    """Root of the long-term memory errors."""


class MemoryEntryError(LongTermError):
    """A memory entry (or the arguments to make one) is invalid; nothing was written."""


class DreamError(LongTermError):
    """A Dream run, log or restore failed; the cursor and the long-term files are unchanged."""


class VersionNotFoundError(DreamError):
    """The requested version is not in the long-term git history."""


class GitCorruptionError(DreamError, CorruptionError):
    """``long_term/.git`` is unreadable or damaged; the long-term files themselves are untouched."""
