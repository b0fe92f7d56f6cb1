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
    └── ClosedError              the memory was used after it was closed
"""

from __future__ import annotations

__all__ = [
    "AidenError",
    "ClosedError",
    "ConfigError",
    "CorruptionError",
    "DurabilityError",
    "EventTooLargeError",
    "InvalidEventError",
    "InvalidIdError",
    "InvalidSummaryError",
    "LockError",
    "RecallError",
    "StorageError",
    "SummarizerError",
    "SummarizerTimeout",
    "SummarizerUnavailable",
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
