"""The litellm embedder: hybrid recall's vectors from any embedding model litellm supports
(the :class:`~aiden.recall.embedding.Embedder` protocol is the core's)."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from typing import Any

from aiden.errors import RecallError
from aiden.recall.embedding import clip_text, l2_normalize
from aiden.summarizers.llm.client import _field

__all__ = ["LiteLLMEmbedder"]


class LiteLLMEmbedder:
    """Embeds with any model litellm supports, in batches of ``batch_size`` texts per request.

    ``api_base`` / ``api_key`` are passed to litellm when given (an
    OpenAI-compatible server: ``model="openai/NAME"``, ``api_base="http://host/v1"``).
    ``dimensions``, when given, is sent to the provider (only some models
    accept it) and every returned vector must have that length; otherwise the
    length is learned from the first answer and then enforced. Texts are cut
    to :data:`~aiden.recall.embedding.MAX_TEXT_CHARS`; an empty text is sent as
    one space. Vectors are normalised here.

    Failures raise :class:`RecallError`: litellm missing or broken, the request
    failing, or an answer without one finite, non-zero vector of the right
    length per text. The provider client retries a transient failure once (a
    request may take up to twice ``timeout``).
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        dimensions: int | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must be a non-empty litellm model name")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if dimensions is not None and dimensions < 1:
            raise ValueError(f"dimensions must be positive, got {dimensions}")
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.batch_size = batch_size
        self.timeout = timeout
        self._requested = dimensions
        self._dimensions = dimensions
        self.requests = 0
        """HTTP requests made so far (one per batch)."""

    @property
    def name(self) -> str:
        """``model``, with ``@dimensions`` appended when a size was requested."""
        return self.model if self._requested is None else f"{self.model}@{self._requested}"

    @property
    def dimensions(self) -> int | None:
        """The requested size, else the length of the first vector received (``None`` before that)."""
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One normalised vector per text, ``batch_size`` texts per request (:class:`RecallError` on failure)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return []
        try:
            # Looked up at each call: tests replace it in its module.
            from aiden.summarizers.llm.client import _import_litellm

            handle = _import_litellm()
        except Exception as exc:  # a broken install may fail in any way at import
            raise RecallError(f"litellm cannot be imported: {type(exc).__name__}: {exc}") from exc
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [clip_text(t) or " " for t in texts[start : start + self.batch_size]]
            out.extend(self._embed_batch(handle, batch))
        return out

    def _embed_batch(self, handle: Any, batch: list[str]) -> list[list[float]]:
        kwargs: dict[str, Any] = {"model": self.model, "input": batch, "timeout": self.timeout}
        optional = {"api_base": self.api_base, "api_key": self.api_key, "dimensions": self._requested}
        kwargs.update({name: value for name, value in optional.items() if value is not None})
        self.requests += 1
        try:
            # litellm's own retries off; the provider client (openai's) retries once.
            # (litellm 1.110 turns max_retries=0 into its default of 2: ``0 or 2``.)
            response = handle.module.embedding(num_retries=0, max_retries=1, **kwargs)
        except Exception as exc:
            raise RecallError(f"embedding with {self.model!r} {_failure(handle, exc)}") from exc
        vectors = _vectors_of(response, len(batch), self.model)
        width = len(vectors[0])
        expected = self._dimensions
        if expected is not None and width != expected:
            raise RecallError(
                f"embedding model {self.model!r} returned {width} dimensions, expected {expected}"
            )
        self._dimensions = width
        return vectors


def _failure(handle: Any, exc: Exception) -> str:
    detail = f"{type(exc).__name__}: {str(exc)[:300]}"
    if isinstance(exc, handle.timeout):
        return f"timed out: {detail}"
    if isinstance(exc, handle.permanent):
        return f"was rejected: {detail}"
    if handle.is_transient(exc):
        return f"failed (provider unavailable or overloaded): {detail}"
    return f"failed: {detail}"


def _vectors_of(response: Any, count: int, model: str) -> list[list[float]]:
    """The normalised vectors of an embedding response, ordered by their ``index``."""
    data = _field(response, "data")
    if not isinstance(data, Sequence) or isinstance(data, str | bytes):
        raise RecallError(f"embedding response of {model!r} has no data list")
    if len(data) != count:
        raise RecallError(f"embedding model {model!r} returned {len(data)} vectors for {count} texts")
    by_index: dict[int, list[float]] = {}
    for position, item in enumerate(data):
        index = _field(item, "index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = position
        by_index[index] = _vector(_field(item, "embedding"), model)
    if sorted(by_index) != list(range(count)):
        raise RecallError(f"embedding response of {model!r} has indexes other than 0..{count - 1}")
    vectors = [by_index[i] for i in range(count)]
    if len({len(v) for v in vectors}) != 1:
        raise RecallError(f"embedding model {model!r} returned vectors of different lengths")
    return vectors


def _vector(raw: Any, model: str) -> list[float]:
    if isinstance(raw, str):  # encoding_format="base64": little-endian float32
        try:
            blob = base64.b64decode(raw, validate=True)
        except ValueError as exc:
            raise RecallError(f"embedding of {model!r} is not valid base64") from exc
        if not blob or len(blob) % 4:
            raise RecallError(f"embedding of {model!r} is {len(blob)} bytes, not float32 values")
        values: list[float] = list(struct.unpack(f"<{len(blob) // 4}f", blob))
    elif isinstance(raw, Sequence) and all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in raw
    ):
        values = [float(x) for x in raw]
    else:
        raise RecallError(f"embedding of {model!r} is not a list of numbers: {type(raw).__name__}")
    try:
        return l2_normalize(values)
    except RecallError as exc:
        raise RecallError(f"embedding model {model!r} returned an unusable vector: {exc}") from None
