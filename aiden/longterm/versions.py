"""Dream's versions of the long-term files, whatever stores them (pure; no dulwich here).

The file backend keeps them as git commits (:mod:`aiden.longterm.gitstore`),
the PostgreSQL backend as rows; both answer ``dream_log`` with
:class:`Version` and resolve a restore target with :func:`check_target` and
:func:`unique_match`, so a target means the same thing, and a bad one fails
with the same message, on every backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from aiden.errors import VersionNotFoundError

__all__ = ["Version", "check_target", "unique_match"]

_HEX: Final = frozenset("0123456789abcdef")


class Version(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded version of the long-term files."""

    commit_id: str
    timestamp: int
    message: str
    """The full commit message; its first line is a readable one-line summary."""

    @property
    def title(self) -> str:
        """The first line of the message."""
        return self.message.split("\n", 1)[0]


def check_target(target: str | int) -> int | str:
    """A restore target checked: steps back from the newest (an int >= 0) or a lowercase id prefix.

    An id or prefix is 4 to 40 hex digits; anything else is
    :class:`~aiden.errors.VersionNotFoundError`.
    """
    if isinstance(target, int) and not isinstance(target, bool):
        if target < 0:
            raise VersionNotFoundError("steps back must be >= 0")
        return target
    text = str(target).strip().lower()
    if len(text) < 4 or len(text) > 40 or not set(text) <= _HEX:
        raise VersionNotFoundError(f"not a commit id: {target!r}")
    return text


def unique_match(matches: Sequence[str], target: str | int) -> str:
    """The one id of ``matches`` (the ids a prefix matched); VersionNotFoundError for none or several."""
    if len(matches) != 1:
        raise VersionNotFoundError(f"{'no' if not matches else 'ambiguous'} version {target!r}")
    return matches[0]
