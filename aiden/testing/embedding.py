"""A deterministic recall embedder: hashed words and character trigrams, no model, no network."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from typing import Final

__all__ = ["HashingEmbedder", "hashing_embedding"]

_WORD: Final = re.compile(r"\w+")


def _bucket(feature: str, dims: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dims, (1.0 if (value >> 63) & 1 else -1.0)


def hashing_embedding(text: str, dims: int = 64) -> list[float]:
    """A deterministic unit vector of ``text``: its lower-cased words and their character trigrams, hashed.

    Each word adds 1 and each trigram of ``#word#`` adds 0.5 to a signed
    bucket (blake2b, so the same on every run and platform). Texts sharing
    words get similar vectors; a text without words maps to a fixed vector.
    """
    if dims < 1:
        raise ValueError(f"dims must be at least 1, got {dims}")
    vector = [0.0] * dims
    words = _WORD.findall(text.lower()) or ["\x00empty"]
    for word in words:
        index, sign = _bucket("w:" + word, dims)
        vector[index] += sign
        padded = f"#{word}#"
        for i in range(len(padded) - 2):
            index, sign = _bucket("t:" + padded[i : i + 3], dims)
            vector[index] += 0.5 * sign
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:  # every feature cancelled out
        vector[0], norm = 1.0, 1.0
    return [x / norm for x in vector]


class HashingEmbedder:
    """A deterministic :class:`~aiden.recall.embedding.Embedder` for tests: :func:`hashing_embedding`.

    ``calls`` counts :meth:`embed` calls and ``texts`` the texts embedded;
    ``fail_with``, when set, is raised by the next calls instead.
    """

    def __init__(self, dims: int = 64, *, name: str | None = None) -> None:
        if dims < 1:
            raise ValueError(f"dims must be at least 1, got {dims}")
        self._dims = dims
        self._name = name or f"hashing-{dims}"
        self.calls = 0
        self.texts = 0
        self.seen: list[str] = []
        """Every text embedded, in order."""
        self.fail_with: BaseException | None = None

    @property
    def name(self) -> str:
        """``hashing-DIMS`` unless another name was given."""
        return self._name

    @property
    def dimensions(self) -> int:
        """The vector length."""
        return self._dims

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One :func:`hashing_embedding` per text."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        self.calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        self.texts += len(texts)
        self.seen.extend(texts)
        return [hashing_embedding(text, self._dims) for text in texts]
