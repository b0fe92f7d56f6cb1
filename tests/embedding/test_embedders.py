"""Embedders: protocol conformance, HashingEmbedder, LiteLLMEmbedder against FakeLLMServer, error translation."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from aiden.errors import RecallError
from aiden.recall.embedding import MAX_TEXT_CHARS, Embedder, clip_text, l2_normalize
from aiden.summarizers.llm import embedder as litellm_embedder
from aiden.summarizers.llm.embedder import LiteLLMEmbedder
from aiden.testing import FakeLLMServer, HashingEmbedder, hashing_embedding

TEXTS = ["How old are you?", "What is your age?", "", "pytest failed in test_parser.py"]


def norm(vector: list[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def check_conformance(embedder: Embedder) -> list[list[float]]:
    assert isinstance(embedder, Embedder)
    assert isinstance(embedder.name, str) and embedder.name
    vectors = embedder.embed(TEXTS)
    assert len(vectors) == len(TEXTS)
    assert {len(v) for v in vectors} == {embedder.dimensions}
    for v in vectors:
        assert all(isinstance(x, float) for x in v)
        assert norm(v) == pytest.approx(1.0, abs=1e-6)
    assert embedder.embed([]) == []
    with pytest.raises(TypeError):
        embedder.embed("one string")
    return vectors


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv
        assert srv.handler_errors == []


def against(server: FakeLLMServer, **kwargs: Any) -> LiteLLMEmbedder:
    return LiteLLMEmbedder("openai/test-embedding", api_base=server.base_url, api_key="sk-test", **kwargs)


# -- helpers -----------------------------------------------------------------


def test_clip_text() -> None:
    assert clip_text("abc", 5) == "abc"
    assert clip_text("abcdef", 3) == "abc"
    assert clip_text("ab\ud83d\ude00", 3) == "ab"  # never half a surrogate pair
    assert len(clip_text("x" * (MAX_TEXT_CHARS + 5))) == MAX_TEXT_CHARS


def test_l2_normalize() -> None:
    assert l2_normalize([3, 4]) == [0.6, 0.8]
    for bad in ([], [0.0, 0.0], [math.inf, 1.0], [math.nan]):
        with pytest.raises(RecallError, match="cannot be normalised"):
            l2_normalize(bad)


def test_local_embedder_is_exported_lazily() -> None:
    import aiden
    from aiden.recall.embedding import LocalMiniLMEmbedder

    assert aiden.LocalMiniLMEmbedder is LocalMiniLMEmbedder
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = aiden.Nope  # type: ignore[attr-defined]


# -- HashingEmbedder -----------------------------------------------------------


def test_hashing_embedder_conforms_and_counts() -> None:
    fake = HashingEmbedder()
    vectors = check_conformance(fake)
    assert fake.name == "hashing-64" and fake.dimensions == 64
    assert (fake.calls, fake.texts, fake.seen) == (2, 4, TEXTS)
    assert vectors == [hashing_embedding(t) for t in TEXTS]
    assert HashingEmbedder(8, name="custom").name == "custom"


def test_hashing_embedding_is_deterministic_and_similar_for_shared_words() -> None:
    a = hashing_embedding("the parser fails on empty input", 64)
    b = hashing_embedding("Parser fails on EMPTY input!", 64)
    c = hashing_embedding("deploy the kubernetes cluster", 64)
    assert a == hashing_embedding("the parser fails on empty input", 64)
    cos_ab = sum(x * y for x, y in zip(a, b, strict=True))
    cos_ac = sum(x * y for x, y in zip(a, c, strict=True))
    assert cos_ab > 0.8 > cos_ac
    assert norm(hashing_embedding("", 16)) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        hashing_embedding("x", 0)
    with pytest.raises(ValueError):
        HashingEmbedder(0)


def test_hashing_embedder_fail_with() -> None:
    fake = HashingEmbedder()
    fake.fail_with = RecallError("boom")
    with pytest.raises(RecallError, match="boom"):
        fake.embed(["x"])
    assert (fake.calls, fake.texts) == (1, 0)


# -- FakeLLMServer's /v1/embeddings -----------------------------------------------


def test_fake_server_embeddings_route() -> None:
    with FakeLLMServer() as srv:
        status, _, payload = srv._reply_for(_request({"model": "m", "input": "hi", "dimensions": 8}))
        assert status == 200
        import json

        body = json.loads(payload)
        assert body["data"] == [{"object": "embedding", "index": 0, "embedding": hashing_embedding("hi", 8)}]
        status, _, payload = srv._reply_for(_request({"input": ["a", "b"], "encoding_format": "base64"}))
        data = json.loads(payload)["data"]
        decoded = list(struct.unpack("<64f", base64.b64decode(data[1]["embedding"])))
        assert decoded == pytest.approx(hashing_embedding("b"), abs=1e-7)
        assert srv._reply_for(_request({"input": [1, 2]}))[0] == 400


def _request(body: dict[str, Any]) -> Any:
    from aiden.testing import RecordedRequest

    return RecordedRequest(method="POST", path="/v1/embeddings", headers={}, body=body)


# -- LiteLLMEmbedder ---------------------------------------------------------------


@pytest.mark.usefixtures("litellm_ready")
def test_litellm_embedder_conforms(server: FakeLLMServer) -> None:
    embedder = against(server, batch_size=3)
    assert embedder.dimensions is None
    vectors = check_conformance(embedder)
    assert embedder.dimensions == 64 and embedder.name == "openai/test-embedding"
    # The empty text is sent as one space; the fake embeds that like any wordless text.
    assert vectors == [pytest.approx(hashing_embedding(t or " "), abs=1e-6) for t in TEXTS]
    bodies = [r.body for r in server.requests]
    assert [r.path for r in server.requests] == ["/v1/embeddings", "/v1/embeddings"]
    assert [b["input"] for b in bodies] == [[TEXTS[0], TEXTS[1], " "], [TEXTS[3]]]
    assert all("dimensions" not in b for b in bodies)
    assert embedder.requests == 2


@pytest.mark.usefixtures("litellm_ready")
def test_litellm_embedder_sends_dimensions_and_clips(server: FakeLLMServer) -> None:
    # litellm forwards ``dimensions`` only for models it knows accept it.
    embedder = LiteLLMEmbedder(
        "openai/text-embedding-3-small", api_base=server.base_url, api_key="sk-test", dimensions=16
    )
    assert embedder.name == "openai/text-embedding-3-small@16" and embedder.dimensions == 16
    [vector] = embedder.embed(["y" * (MAX_TEXT_CHARS + 100)])
    assert len(vector) == 16
    body = server.requests[0].body
    assert body["dimensions"] == 16
    assert body["input"] == ["y" * MAX_TEXT_CHARS]


def _reply(vectors: list[Any], indexes: list[Any] | None = None) -> dict[str, Any]:
    indexes = indexes if indexes is not None else list(range(len(vectors)))
    data = [
        {"object": "embedding", "index": i, "embedding": v} for i, v in zip(indexes, vectors, strict=True)
    ]
    return {
        "json": {
            "object": "list",
            "data": data,
            "model": "m",
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
    }


@pytest.mark.usefixtures("litellm_ready")
def test_litellm_embedder_orders_by_index_and_normalises(server: FakeLLMServer) -> None:
    server.add_script(_reply([[0.0, 2.0], [3.0, 4.0]], [1, 0]))
    assert against(server).embed(["a", "b"]) == [[0.6, 0.8], [0.0, 1.0]]


def test_response_parsing_without_litellm() -> None:
    # What litellm passes through unvalidated (its pydantic check only warns):
    # base64 strings, objects with attributes, malformed vectors.
    b64 = base64.b64encode(struct.pack("<2f", 0.0, 2.0)).decode()

    class Item:
        def __init__(self, index: object, vector: object) -> None:
            self.index, self.embedding = index, vector

    class Response:
        def __init__(self) -> None:
            self.data = [Item(None, b64), Item(True, [3, 4])]

    assert litellm_embedder._vectors_of(Response(), 2, "m") == [[0.0, 1.0], [0.6, 0.8]]
    bad: list[tuple[Any, str]] = [
        ({"data": "nope"}, "has no data list"),
        ({}, "has no data list"),
        ({"data": [{"embedding": [1.0]}, {"embedding": ["a"]}]}, "not a list of numbers: list"),
        ({"data": [{"embedding": [1.0]}, {"embedding": None}]}, "not a list of numbers: NoneType"),
        ({"data": [{"embedding": [1.0]}, {"embedding": [True]}]}, "not a list of numbers"),
        ({"data": [{"embedding": [1.0]}, {"embedding": "!!notbase64"}]}, "not valid base64"),
        ({"data": [{"embedding": [1.0]}, {"embedding": base64.b64encode(b"abc").decode()}]}, "3 bytes"),
        ({"data": [{"embedding": [1.0]}, {"embedding": ""}]}, "0 bytes"),
    ]
    for response, message in bad:
        with pytest.raises(RecallError, match=message):
            litellm_embedder._vectors_of(response, 2, "m")


NO_RETRY = {"x-should-retry": "false"}


@pytest.mark.usefixtures("litellm_ready")
@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            {"status": 500, "headers": NO_RETRY},
            r"failed \(provider unavailable or overloaded\): InternalServerError",
        ),
        ({"status": 401, "headers": NO_RETRY}, "was rejected: AuthenticationError"),
        ({"raw": "not json"}, "failed"),
        (_reply([[1.0, 0.0]]), "returned 1 vectors for 2 texts"),
        (_reply([[1.0, 0.0], [1.0]]), "vectors of different lengths"),
        (_reply([[1.0, 0.0], [0.0, 0.0]]), "unusable vector"),
        (_reply([[1.0, 0.0], [0.0, 1.0]], [0, 0]), "indexes other than 0..1"),
    ],
)
def test_litellm_embedder_failures_are_recall_errors(server: FakeLLMServer, reply: Any, message: str) -> None:
    server.add_script(reply)
    with pytest.raises(RecallError, match=message):
        against(server).embed(["a", "b"])


@pytest.mark.usefixtures("litellm_ready")
def test_litellm_embedder_retries_a_transient_error_once(server: FakeLLMServer) -> None:
    fast = {"retry-after-ms": "1"}
    server.add_script({"status": 503, "headers": fast})
    assert len(against(server).embed(["a"])) == 1
    server.add_script({"status": 503, "headers": fast}, {"status": 503, "headers": fast})
    with pytest.raises(RecallError, match="ServiceUnavailableError"):
        against(server).embed(["a"])
    assert len(server.requests) == 4


@pytest.mark.usefixtures("litellm_ready")
def test_litellm_embedder_dimension_change_is_an_error(server: FakeLLMServer) -> None:
    embedder = against(server)
    embedder.embed(["a"])
    server.add_script(_reply([[1.0, 0.0]]))
    with pytest.raises(RecallError, match="returned 2 dimensions, expected 64"):
        embedder.embed(["a"])


@pytest.mark.usefixtures("litellm_ready")
def test_litellm_embedder_connection_refused() -> None:
    with FakeLLMServer() as srv:
        base = srv.base_url
    embedder = LiteLLMEmbedder("openai/x", api_base=base, api_key="k", timeout=2)
    with pytest.raises(RecallError, match="openai/x"):
        embedder.embed(["a"])


def test_litellm_import_failure_is_a_recall_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import aiden.summarizers.llm.client as llm

    def broken() -> Any:
        raise ImportError("no litellm here")

    monkeypatch.setattr(llm, "_import_litellm", broken)
    with pytest.raises(RecallError, match="litellm cannot be imported: ImportError: no litellm here"):
        LiteLLMEmbedder("openai/x").embed(["a"])


def test_cancellation_propagates(monkeypatch: pytest.MonkeyPatch) -> None:
    import aiden.summarizers.llm.client as llm

    class Module:
        @staticmethod
        def embedding(**kwargs: Any) -> Any:
            raise KeyboardInterrupt

    class Handle:
        module = Module

    monkeypatch.setattr(llm, "_import_litellm", lambda: Handle)
    with pytest.raises(KeyboardInterrupt):
        LiteLLMEmbedder("openai/x").embed(["a"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model": ""},
        {"model": "m", "batch_size": 0},
        {"model": "m", "timeout": 0},
        {"model": "m", "dimensions": 0},
    ],
)
def test_litellm_embedder_bad_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        LiteLLMEmbedder(**kwargs)
