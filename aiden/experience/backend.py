"""The storage protocol of experience memory: committed episodes, and the records and profiles they taught.

The experience service (:mod:`aiden.experience.service`) runs on these two
seams only, so experience memory follows the session store: files under the
memory's root by default (:class:`~aiden.experience.episodestore.EpisodeStore`,
:class:`~aiden.experience.recordstore.RecordStore`), rows in PostgreSQL for a
memory opened on a PostgreSQL store (:mod:`aiden.experience.postgres`),
where every worker sharing the long-term namespace learns from and recalls the
same records. :mod:`aiden.testing.conformance_experience` is the suite every
backend passes. Every method blocks: the experience actor calls them from a
worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from aiden.experience.episodes import Episode
from aiden.experience.episodestore import EpisodeRow
from aiden.experience.records import EnvironmentProfile, ExperienceRecord, RecordRow

__all__ = ["EpisodeBackend", "RecordBackend"]


class EpisodeBackend(Protocol):
    """Committed episodes and which of them learning has processed."""

    def commit(self, episode: Episode, *, now: float) -> bool:
        """Persist ``episode``; False (and nothing written) when its id is already committed."""
        ...

    def rows(self) -> list[EpisodeRow]:
        """Every committed episode's row, in commit order."""
        ...

    def load(self, row: EpisodeRow) -> Episode | None:
        """The committed episode of ``row`` (None, reported, when it cannot be read)."""
        ...

    def get(self, episode_id: str) -> Episode | None:
        """The committed episode ``episode_id`` (None if unknown)."""
        ...

    def pending(self) -> list[EpisodeRow]:
        """Committed episodes not processed yet, in commit order."""
        ...

    def mark_processed(self, row: EpisodeRow, summary: dict[str, Any]) -> None:
        """Record that what ``row``'s episode taught is committed (``summary``: what, for inspection)."""
        ...


class RecordBackend(Protocol):
    """Experience records (created or replaced by id) and environment profiles."""

    def apply(self, records: Sequence[ExperienceRecord]) -> None:
        """Create or replace ``records`` by id, all at once; a replaced record keeps its place in :meth:`rows`."""
        ...

    def rows(self) -> list[RecordRow]:
        """Every record's row, oldest first."""
        ...

    def records(self, *, environment: str | None = None, now: float | None = None) -> list[ExperienceRecord]:
        """Every record (any status) of ``environment`` (None: all); unexpired ones only when ``now`` is given."""
        ...

    def search(
        self,
        terms: Sequence[str],
        *,
        now: float,
        k: int,
        environment: str | None = None,
        kinds: Sequence[str] | None = None,
        query: str = "",
    ) -> list[ExperienceRecord]:
        """The ``k`` best active, unexpired records of ``environment`` (or for every one) for ``terms``."""
        ...

    def save_vectors(self) -> bool:
        """Persist vectors computed since the last call, if the backend keeps any; whether it wrote."""
        ...

    def save_profile(self, profile: EnvironmentProfile) -> EnvironmentProfile:
        """Merge ``profile``'s observations into its environment's stored profile (newest value wins)."""
        ...

    def profile(self, environment: str) -> EnvironmentProfile | None:
        """The stored profile of ``environment`` (None if none)."""
        ...
